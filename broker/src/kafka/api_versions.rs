//! ApiVersions: the APIs and versions this broker serves, and the answer
//! to a request for them. It advertises exactly what works, and (v3+)
//! the features as Kafka 4 does: `transaction.version` finalized at the
//! broker's setting (2 by default), so clients that know KIP-890 use an
//! epoch per transaction (the broker follows each request's version
//! either way).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, ResponseHeader};
use kafka_protocol::protocol::{Encodable, HeaderVersion};
use kafka_protocol::ResponseError;

use super::request::Request;

/// The ApiVersions versions served.
pub const VERSIONS: (i16, i16) = (0, 4);

/// The transaction versions this broker supports (0-2).
const TRANSACTION_VERSION: &str = "transaction.version";
const TRANSACTION_VERSION_MAX: i16 = 2;

/// The epoch of the finalized features: they never change here, but a
/// client (the Java one) only reads them at an epoch of 0 or more.
const FEATURES_EPOCH: i64 = 0;

/// The APIs a broker serves and their (min, max) versions.
pub type Served = [(ApiKey, (i16, i16))];

/// Answers an ApiVersions request with a whole response frame body
/// (header and body, without the size prefix).
///
/// A version newer than served is answered as Kafka does: a v0 response
/// with UNSUPPORTED_VERSION and the supported ranges, so the client can
/// retry with a version it finds there.
pub fn answer(request: &Request, served: &Served, transaction_version: i16) -> Bytes {
    let requested = request.header.request_api_version;
    let (min, max) = VERSIONS;
    let (version, error) = if (min..=max).contains(&requested) {
        (requested, 0)
    } else {
        (0, ResponseError::UnsupportedVersion.code())
    };
    let response = ApiVersionsResponse::default()
        .with_error_code(error)
        .with_api_keys(
            served
                .iter()
                .map(|(key, (min, max))| {
                    ApiVersion::default()
                        .with_api_key(*key as i16)
                        .with_min_version(*min)
                        .with_max_version(*max)
                })
                .collect(),
        );
    let response = with_features(response, version, transaction_version);
    let header = ResponseHeader::default().with_correlation_id(request.header.correlation_id);
    let mut out = BytesMut::new();
    // ApiVersions responses always use header v0, whatever the request's.
    header
        .encode(&mut out, ApiVersionsResponse::header_version(version))
        .expect("a response header encodes");
    response
        .encode(&mut out, version)
        .expect("an ApiVersions response encodes");
    out.freeze()
}

/// The features of a `version` answer: finalized from v3 (a level of 0
/// left out, as Kafka does); supported from v4 only (Kafka leaves out
/// features whose lowest level is 0 below v4: older clients refuse them).
fn with_features(
    response: ApiVersionsResponse,
    version: i16,
    transaction_version: i16,
) -> ApiVersionsResponse {
    if version < 3 {
        return response;
    }
    let finalized = (transaction_version > 0).then(|| {
        FinalizedFeatureKey::default()
            .with_name(TRANSACTION_VERSION.into())
            .with_min_version_level(transaction_version)
            .with_max_version_level(transaction_version)
    });
    let supported = (version >= 4).then(|| {
        SupportedFeatureKey::default()
            .with_name(TRANSACTION_VERSION.into())
            .with_min_version(0)
            .with_max_version(TRANSACTION_VERSION_MAX)
    });
    response
        .with_finalized_features_epoch(FEATURES_EPOCH)
        .with_finalized_features(finalized.into_iter().collect())
        .with_supported_features(supported.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::request::parse;
    use kafka_protocol::messages::{ApiVersionsRequest, RequestHeader};
    use kafka_protocol::protocol::{Decodable, StrBytes};

    /// Encodes a request as a client would (header + body).
    fn client_request(version: i16, correlation_id: i32) -> Bytes {
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::ApiVersions as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("test")));
        let mut out = BytesMut::new();
        let encode_version = version.min(4);
        header
            .encode(&mut out, ApiVersionsRequest::header_version(encode_version))
            .unwrap();
        ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("test"))
            .with_client_software_version(StrBytes::from_static_str("1"))
            .encode(&mut out, encode_version)
            .unwrap();
        if version > 4 {
            // A client newer than the codec: patch the version in the header.
            out[2..4].copy_from_slice(&version.to_be_bytes());
        }
        out.freeze()
    }

    fn decode_response(mut bytes: Bytes, version: i16) -> (i32, ApiVersionsResponse) {
        let header =
            ResponseHeader::decode(&mut bytes, ApiVersionsResponse::header_version(version))
                .unwrap();
        let response = ApiVersionsResponse::decode(&mut bytes, version).unwrap();
        assert!(bytes.is_empty(), "nothing after the response");
        (header.correlation_id, response)
    }

    const TABLE: &Served = &[(ApiKey::Produce, (3, 13)), (ApiKey::ApiVersions, VERSIONS)];

    #[test]
    fn every_served_version_is_answered_in_kind() {
        for version in 0..=4 {
            let request = parse(client_request(version, 40 + version as i32)).unwrap();
            let (correlation, response) = decode_response(answer(&request, TABLE, 2), version);
            assert_eq!(correlation, 40 + version as i32);
            assert_eq!(response.error_code, 0);
            assert_eq!(response.api_keys.len(), TABLE.len());
            assert_eq!(response.api_keys[1].max_version, 4);
            assert_eq!(response.api_keys[0].min_version, 3);
        }
    }

    #[test]
    fn transaction_version_2_is_finalized_from_v3_and_supported_from_v4() {
        let features = |version: i16| {
            let request = parse(client_request(version, 1)).unwrap();
            decode_response(answer(&request, TABLE, 2), version).1
        };
        let v3 = features(3);
        assert_eq!(
            v3.finalized_features_epoch, 0,
            "a client reads them only at 0+"
        );
        assert_eq!(v3.finalized_features.len(), 1);
        assert_eq!(
            v3.finalized_features[0].name.as_str(),
            "transaction.version"
        );
        assert_eq!(v3.finalized_features[0].max_version_level, 2);
        assert!(v3.supported_features.is_empty(), "min 0 left out below v4");
        let v4 = features(4);
        assert_eq!(v4.supported_features.len(), 1);
        assert_eq!(v4.supported_features[0].max_version, 2);
        assert!(features(2).finalized_features.is_empty());
        let request = parse(client_request(3, 1)).unwrap();
        let classic = decode_response(answer(&request, TABLE, 0), 3).1;
        assert!(classic.finalized_features.is_empty(), "level 0 left out");
    }

    #[test]
    fn a_too_new_version_gets_a_v0_answer_with_unsupported_version() {
        for version in [5, 9] {
            let request = parse(client_request(version, 7)).unwrap();
            let (correlation, response) = decode_response(answer(&request, TABLE, 2), 0);
            assert_eq!(correlation, 7);
            assert_eq!(response.error_code, 35);
            assert_eq!(response.api_keys[1].api_key, ApiKey::ApiVersions as i16);
        }
    }

    #[test]
    fn unknown_keys_and_short_or_garbled_headers_are_errors_not_panics() {
        use crate::kafka::request::HeaderError;
        assert_eq!(
            parse(Bytes::from_static(&[0, 18])).unwrap_err(),
            HeaderError::TooShort(2)
        );
        assert_eq!(
            parse(Bytes::from_static(&[0x7f, 0x7f, 0, 0, 0, 0, 0, 1])).unwrap_err(),
            HeaderError::UnknownApiKey(0x7f7f)
        );
        // Header v2 with a client id length running past the frame.
        let garbled = Bytes::from_static(&[0, 18, 0, 3, 0, 0, 0, 1, 0x7f, 0x00, b'x']);
        assert!(matches!(
            parse(garbled),
            Err(HeaderError::MalformedHeader(_))
        ));
        let mut seed = 3u64;
        for _ in 0..5_000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = (seed >> 59) as usize;
            let bytes: Vec<u8> = (0..len).map(|i| (seed >> (i % 7 * 8)) as u8).collect();
            let mut frame = vec![0u8, 18];
            frame.extend_from_slice(&bytes);
            if let Ok(request) = parse(Bytes::from(frame)) {
                let _ = answer(&request, TABLE, 2);
            }
        }
    }
}
