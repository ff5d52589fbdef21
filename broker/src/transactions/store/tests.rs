//! The coordinator's rules, one request at a time: a transaction's life,
//! fencing, retries, changes in flight, timeouts, epoch exhaustion.

use super::*;

const TIMEOUT: i32 = 60_000;

fn codes(error: ResponseError) -> Code {
    error.code()
}

/// A store and a producer id allocator counting from 1000.
fn store() -> (TxnStore, impl FnMut() -> i64) {
    let mut next = 1000;
    (TxnStore::default(), move || {
        next += 1;
        next
    })
}

/// Applies a step as if its write succeeded; returns it.
fn durable(store: &mut TxnStore, step: Step) -> Step {
    store.written(&step);
    step
}

fn parts(names: &[(&str, i32)]) -> Vec<TopicPartition> {
    names.iter().map(|(t, p)| (t.to_string(), *p)).collect()
}

#[test]
fn a_transaction_begins_commits_and_a_retried_end_is_answered() {
    let (mut txns, mut ids) = store();
    let init = txns
        .init_producer_id("tx", TIMEOUT, None, 0, &mut ids)
        .unwrap();
    let init = durable(&mut txns, init);
    assert_eq!(init.then, Then::Answer);
    let (pid, epoch) = (init.next.producer_id, init.next.producer_epoch);
    assert_eq!((pid, epoch), (1001, 0));
    let add = txns
        .add_partitions("tx", pid, epoch, &parts(&[("a", 0)]), 10)
        .unwrap();
    let add = durable(&mut txns, add.unwrap());
    assert_eq!(add.next.state, TxnState::Ongoing);
    assert_eq!(add.next.start_ms, 10);
    assert!(
        txns.add_partitions("tx", pid, epoch, &parts(&[("a", 0)]), 11)
            .unwrap()
            .is_none(),
        "already in: nothing to write"
    );
    let more = txns
        .add_partitions("tx", pid, epoch, &parts(&[("b", 1)]), 12)
        .unwrap();
    assert_eq!(durable(&mut txns, more.unwrap()).next.partitions.len(), 2);
    let end = txns.end_txn("tx", pid, epoch, true, 20).unwrap().unwrap();
    let end = durable(&mut txns, end);
    assert_eq!(
        (end.next.state, end.then),
        (TxnState::PrepareCommit, Then::AnswerThenMarkers)
    );
    assert_eq!(
        txns.end_txn("tx", pid, epoch, true, 21).unwrap_err(),
        codes(ResponseError::ConcurrentTransactions),
        "markers still being written"
    );
    assert_eq!(
        txns.add_partitions("tx", pid, epoch, &parts(&[("c", 0)]), 21)
            .unwrap_err(),
        codes(ResponseError::ConcurrentTransactions)
    );
    let complete = txns.markers_written("tx", 30).unwrap();
    let complete = durable(&mut txns, complete);
    assert_eq!(complete.next.state, TxnState::CompleteCommit);
    assert!(complete.next.partitions.is_empty());
    assert!(
        txns.end_txn("tx", pid, epoch, true, 31).unwrap().is_none(),
        "a retry"
    );
    assert_eq!(
        txns.end_txn("tx", pid, epoch, false, 31).unwrap_err(),
        codes(ResponseError::InvalidTxnState)
    );
    // The next transaction starts afresh.
    let next = txns
        .add_partitions("tx", pid, epoch, &parts(&[("c", 0)]), 40)
        .unwrap();
    let next = durable(&mut txns, next.unwrap());
    assert_eq!(
        next.next.partitions,
        parts(&[("c", 0)]).into_iter().collect()
    );
    assert_eq!(next.next.start_ms, 40);
}

#[test]
fn a_new_instance_fences_the_old_and_aborts_its_open_transaction_first() {
    let (mut txns, mut ids) = store();
    let first = {
        let step = txns
            .init_producer_id("tx", TIMEOUT, None, 0, &mut ids)
            .unwrap();
        durable(&mut txns, step)
    };
    let (pid, old) = (first.next.producer_id, first.next.producer_epoch);
    let add = txns
        .add_partitions("tx", pid, old, &parts(&[("a", 0)]), 1)
        .unwrap();
    durable(&mut txns, add.unwrap());
    // The new instance: the open transaction is aborted with a bumped
    // epoch, and the client told to retry.
    let fence = txns
        .init_producer_id("tx", TIMEOUT, None, 5, &mut ids)
        .unwrap();
    let fence = durable(&mut txns, fence);
    assert_eq!(fence.then, Then::FenceThenRetry);
    assert_eq!(
        (fence.next.state, fence.next.producer_epoch),
        (TxnState::PrepareAbort, old + 1)
    );
    assert_eq!(
        fence.next.partitions,
        parts(&[("a", 0)]).into_iter().collect()
    );
    // The old instance is fenced everywhere.
    for refused in [
        txns.end_txn("tx", pid, old, true, 6).unwrap_err(),
        txns.add_partitions("tx", pid, old, &parts(&[("b", 0)]), 6)
            .unwrap_err(),
    ] {
        assert_eq!(refused, codes(ResponseError::ProducerFenced));
    }
    // Asking again with its old epoch is no retry: it is fenced.
    assert_eq!(
        txns.init_producer_id("tx", TIMEOUT, Some((pid, old)), 6, &mut ids)
            .unwrap_err(),
        codes(ResponseError::ConcurrentTransactions),
        "while the abort's markers are written"
    );
    // The retry waits for the markers, then gets the next epoch.
    assert_eq!(
        txns.init_producer_id("tx", TIMEOUT, None, 7, &mut ids)
            .unwrap_err(),
        codes(ResponseError::ConcurrentTransactions)
    );
    {
        let step = txns.markers_written("tx", 8).unwrap();
        durable(&mut txns, step)
    };
    assert_eq!(
        txns.init_producer_id("tx", TIMEOUT, Some((pid, old)), 8, &mut ids)
            .unwrap_err(),
        codes(ResponseError::ProducerFenced),
        "the fenced instance asking with its old epoch"
    );
    let again = {
        let step = txns
            .init_producer_id("tx", TIMEOUT, None, 9, &mut ids)
            .unwrap();
        durable(&mut txns, step)
    };
    assert_eq!(
        (again.next.producer_id, again.next.producer_epoch),
        (pid, old + 2)
    );
    assert_eq!(again.next.state, TxnState::Empty);
}

#[test]
fn a_change_in_flight_holds_other_requests_and_a_failed_write_changes_nothing() {
    let (mut txns, mut ids) = store();
    let first = txns
        .init_producer_id("tx", TIMEOUT, None, 0, &mut ids)
        .unwrap();
    assert_eq!(first.id, "tx");
    assert_eq!(
        txns.init_producer_id("tx", TIMEOUT, None, 0, &mut ids)
            .unwrap_err(),
        codes(ResponseError::ConcurrentTransactions)
    );
    txns.write_failed("tx");
    assert!(
        txns.get("tx").is_none(),
        "a first write that failed leaves nothing"
    );
    let init_again = {
        let step = txns
            .init_producer_id("tx", TIMEOUT, None, 0, &mut ids)
            .unwrap();
        durable(&mut txns, step)
    };
    let (pid, epoch) = (init_again.next.producer_id, init_again.next.producer_epoch);
    let add = txns
        .add_partitions("tx", pid, epoch, &parts(&[("a", 0)]), 1)
        .unwrap()
        .unwrap();
    assert_eq!(
        txns.end_txn("tx", pid, epoch, true, 2).unwrap_err(),
        codes(ResponseError::ConcurrentTransactions)
    );
    txns.write_failed(&add.id);
    assert_eq!(txns.get("tx").unwrap().state, TxnState::Empty);
    assert_eq!(
        txns.end_txn("tx", pid, epoch, true, 2).unwrap_err(),
        codes(ResponseError::InvalidTxnState),
        "nothing open to end"
    );
}

#[test]
fn unknown_ids_other_producers_and_bad_timeouts_are_refused() {
    let (mut txns, mut ids) = store();
    assert_eq!(
        txns.end_txn("nobody", 1, 0, true, 0).unwrap_err(),
        codes(ResponseError::InvalidProducerIdMapping)
    );
    for timeout in [0, -1, MAX_TIMEOUT_MS_DEFAULT + 1] {
        assert_eq!(
            txns.init_producer_id("tx", timeout, None, 0, &mut ids)
                .unwrap_err(),
            codes(ResponseError::InvalidTransactionTimeout)
        );
    }
    assert!(txns.get("tx").is_none(), "a refused id is not kept");
    {
        let step = txns
            .init_producer_id("tx", TIMEOUT, None, 0, &mut ids)
            .unwrap();
        durable(&mut txns, step)
    };
    assert_eq!(
        txns.add_partitions("tx", 77, 0, &parts(&[("a", 0)]), 1)
            .unwrap_err(),
        codes(ResponseError::InvalidProducerIdMapping)
    );
    // KIP-360: a client recovering with a producer id that is not this
    // id's is fenced; one that already has the current epoch after a lost
    // answer (asking with the previous one) gets the same epoch again.
    assert_eq!(
        txns.init_producer_id("tx", TIMEOUT, Some((5, 0)), 2, &mut ids)
            .unwrap_err(),
        codes(ResponseError::ProducerFenced)
    );
    let pid = txns.get("tx").unwrap().producer_id;
    let bumped = {
        let step = txns
            .init_producer_id("tx", TIMEOUT, Some((pid, 0)), 3, &mut ids)
            .unwrap();
        durable(&mut txns, step)
    };
    assert_eq!(bumped.next.producer_epoch, 1);
    let retried = {
        let step = txns
            .init_producer_id("tx", TIMEOUT, Some((pid, 0)), 4, &mut ids)
            .unwrap();
        durable(&mut txns, step)
    };
    assert_eq!(
        retried.next.producer_epoch, 1,
        "the retry is answered, not bumped"
    );
}

#[test]
fn a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() {
    let (mut txns, mut ids) = store();
    let init = {
        let step = txns
            .init_producer_id("tx", 1_000, None, 0, &mut ids)
            .unwrap();
        durable(&mut txns, step)
    };
    let (pid, epoch) = (init.next.producer_id, init.next.producer_epoch);
    {
        let step = txns
            .add_partitions("tx", pid, epoch, &parts(&[("a", 0)]), 100)
            .unwrap()
            .unwrap();
        durable(&mut txns, step)
    };
    assert!(txns.timed_out(1_100).is_empty(), "not yet");
    let expired = txns.timed_out(1_101);
    assert_eq!(expired.len(), 1);
    let abort = durable(&mut txns, expired[0].clone());
    assert_eq!(abort.then, Then::Markers);
    assert_eq!(
        (abort.next.state, abort.next.producer_epoch),
        (TxnState::PrepareAbort, epoch + 1)
    );
    assert_eq!(
        txns.end_txn("tx", pid, epoch, true, 1_200).unwrap_err(),
        codes(ResponseError::ProducerFenced)
    );
    assert!(txns.timed_out(10_000).is_empty(), "aborting already");
    assert_eq!(
        txns.preparing().len(),
        1,
        "what a new coordinator would finish"
    );
}

#[test]
fn an_exhausted_epoch_moves_to_a_new_producer_id() {
    let (mut txns, mut ids) = store();
    let mut first = txns
        .init_producer_id("tx", TIMEOUT, None, 0, &mut ids)
        .unwrap();
    first.next.producer_epoch = EPOCH_EXHAUSTED;
    let first = durable(&mut txns, first);
    let next = {
        let step = txns
            .init_producer_id("tx", TIMEOUT, None, 1, &mut ids)
            .unwrap();
        durable(&mut txns, step)
    };
    assert_ne!(next.next.producer_id, first.next.producer_id);
    assert_eq!(next.next.producer_epoch, 0);
    assert_eq!(next.next.previous_producer_id, first.next.producer_id);
}

#[test]
fn a_partition_verifies_only_inside_its_ongoing_transaction() {
    let (mut txns, mut ids) = store();
    let init = txns
        .init_producer_id("tx", TIMEOUT, None, 0, &mut ids)
        .unwrap();
    let init = durable(&mut txns, init);
    let (pid, epoch) = (init.next.producer_id, init.next.producer_epoch);
    let t0 = ("t".to_string(), 0);
    let abortable = Err(codes(ResponseError::TransactionAbortable));
    assert_eq!(
        txns.verify("tx", pid, epoch, &t0),
        abortable,
        "no transaction"
    );
    let add = txns
        .add_partitions("tx", pid, epoch, &parts(&[("t", 0)]), 1)
        .unwrap()
        .unwrap();
    durable(&mut txns, add);
    assert_eq!(txns.verify("tx", pid, epoch, &t0), Ok(()));
    let t1 = ("t".to_string(), 1);
    assert_eq!(txns.verify("tx", pid, epoch, &t1), abortable, "not added");
    let adding = txns
        .add_partitions("tx", pid, epoch, &parts(&[("t", 1)]), 1)
        .unwrap()
        .unwrap();
    assert_eq!(
        txns.verify("tx", pid, epoch, &t0),
        Ok(()),
        "another partition's add in flight holds nothing up"
    );
    assert_eq!(
        txns.verify("tx", pid, epoch, &t1),
        abortable,
        "not yet written"
    );
    durable(&mut txns, adding);
    assert_eq!(txns.verify("tx", pid, epoch, &t1), Ok(()));
    assert_eq!(
        txns.verify("tx", pid, epoch + 1, &t0),
        Err(codes(ResponseError::ProducerFenced))
    );
    assert_eq!(
        txns.verify("tx", pid + 1, epoch, &t0),
        Err(codes(ResponseError::InvalidProducerIdMapping))
    );
    let end = txns.end_txn("tx", pid, epoch, true, 2).unwrap().unwrap();
    durable(&mut txns, end);
    assert_eq!(
        txns.verify("tx", pid, epoch, &t0),
        abortable,
        "being committed: a late batch must not reopen it"
    );
    assert_eq!(
        txns.verify("other", pid, epoch, &t0),
        Err(codes(ResponseError::InvalidProducerIdMapping)),
        "unknown id"
    );
}

#[test]
fn an_idle_id_expires_and_an_open_one_does_not() {
    let (mut txns, mut ids) = store();
    for id in ["idle", "open"] {
        let init = txns
            .init_producer_id(id, TIMEOUT, None, 0, &mut ids)
            .unwrap();
        durable(&mut txns, init);
    }
    let open = txns.get("open").unwrap().clone();
    let add = txns
        .add_partitions(
            "open",
            open.producer_id,
            open.producer_epoch,
            &parts(&[("t", 0)]),
            0,
        )
        .unwrap()
        .unwrap();
    durable(&mut txns, add);
    assert!(
        txns.expired(1_000, 1_000, 10).is_empty(),
        "not past the expiration yet"
    );
    assert!(txns.expired(1_001, 1_000, 0).is_empty(), "at most none");
    let expired = txns.expired(1_001, 1_000, 10);
    assert_eq!(expired.len(), 1, "the open one is a timeout's business");
    assert_eq!(expired[0].id, "idle");
    assert_eq!(expired[0].next.state, TxnState::Dead);
    assert!(
        txns.expired(1_001, 1_000, 10).is_empty(),
        "in flight already"
    );
    durable(&mut txns, expired[0].clone());
    assert!(
        txns.get("idle").is_none(),
        "removed once its tombstone is written"
    );
    assert!(txns.get("open").is_some());
}

mod epoch_bump {
    //! transaction.version 2: an epoch per transaction.

    use super::*;

    /// An initialised producer with one partition in an open transaction,
    /// at `epoch`.
    fn open_at(epoch: i16) -> (TxnStore, impl FnMut() -> i64, i64) {
        let (mut txns, mut ids) = store();
        let mut init = txns
            .init_producer_id("tx", TIMEOUT, None, 0, &mut ids)
            .unwrap();
        init.next.producer_epoch = epoch;
        let pid = durable(&mut txns, init).next.producer_id;
        let add = txns
            .add_partitions_as("tx", pid, epoch, &parts(&[("a", 0)]), 5, 2)
            .unwrap()
            .unwrap();
        assert_eq!(add.next.client_version, 2);
        durable(&mut txns, add);
        (txns, ids, pid)
    }

    /// Completes the decided transaction as the markers would.
    fn complete(txns: &mut TxnStore) -> Step {
        let step = txns.markers_written("tx", 50).unwrap();
        durable(txns, step)
    }

    #[test]
    fn each_end_bumps_the_epoch_and_a_retry_with_the_old_one_is_answered() {
        let (mut txns, mut ids, pid) = open_at(4);
        let end = txns
            .end_txn_v2("tx", pid, 4, true, 10, &mut ids)
            .unwrap()
            .unwrap();
        // The markers carry the bumped epoch; the client goes on with it.
        assert_eq!(end.next.state, TxnState::PrepareCommit);
        assert_eq!(end.next.producer_epoch, 5);
        assert_eq!(end.next.continued_identity(), (pid, 5));
        assert_eq!(end.next.partitions.len(), 1);
        durable(&mut txns, end);
        let busy = txns.end_txn_v2("tx", pid, 4, true, 11, &mut ids);
        assert_eq!(busy, Err(codes(ResponseError::ConcurrentTransactions)));
        assert_eq!(
            txns.end_txn_v2("tx", pid, 4, false, 11, &mut ids),
            Err(codes(ResponseError::InvalidTxnState)),
            "the other outcome while one is being written"
        );
        complete(&mut txns);
        // A retry (its answer was lost) with the epoch before the bump.
        assert_eq!(txns.end_txn_v2("tx", pid, 4, true, 12, &mut ids), Ok(None));
        assert_eq!(txns.get("tx").unwrap().continued_identity(), (pid, 5));
        assert_eq!(
            txns.end_txn_v2("tx", pid, 4, false, 12, &mut ids),
            Err(codes(ResponseError::InvalidTxnState))
        );
        // An older epoch still is a zombie.
        assert_eq!(
            txns.end_txn_v2("tx", pid, 3, true, 12, &mut ids),
            Err(codes(ResponseError::ProducerFenced))
        );
        // The next transaction is at the new epoch; the old one cannot add.
        assert_eq!(
            txns.add_partitions_as("tx", pid, 4, &parts(&[("a", 0)]), 13, 2),
            Err(codes(ResponseError::ProducerFenced))
        );
        let add = txns
            .add_partitions_as("tx", pid, 5, &parts(&[("b", 1)]), 13, 2)
            .unwrap()
            .unwrap();
        assert_eq!(add.next.start_ms, 13);
        assert_eq!(
            add.next.partitions,
            parts(&[("b", 1)]).into_iter().collect()
        );
    }

    #[test]
    fn an_abort_with_nothing_open_fences_with_a_bump_and_no_markers() {
        let (mut txns, mut ids) = store();
        let init = txns
            .init_producer_id("tx", TIMEOUT, None, 0, &mut ids)
            .unwrap();
        let (pid, epoch) = {
            let init = durable(&mut txns, init);
            (init.next.producer_id, init.next.producer_epoch)
        };
        assert_eq!(
            txns.end_txn_v2("tx", pid, epoch, true, 1, &mut ids),
            Err(codes(ResponseError::InvalidTxnState)),
            "nothing to commit"
        );
        let abort = txns
            .end_txn_v2("tx", pid, epoch, false, 2, &mut ids)
            .unwrap()
            .unwrap();
        assert_eq!(abort.next.state, TxnState::PrepareAbort);
        assert!(abort.next.partitions.is_empty());
        assert_eq!(abort.next.producer_epoch, epoch + 1);
        durable(&mut txns, abort);
        complete(&mut txns);
        assert_eq!(
            txns.end_txn_v2("tx", pid, epoch, false, 3, &mut ids),
            Ok(None),
            "its retry"
        );
    }

    #[test]
    fn the_last_epoch_moves_the_producer_to_a_new_id_at_epoch_0() {
        let (mut txns, mut ids, pid) = open_at(EPOCH_EXHAUSTED);
        let end = txns
            .end_txn_v2("tx", pid, EPOCH_EXHAUSTED, true, 10, &mut ids)
            .unwrap()
            .unwrap();
        // Markers at the last epoch of the old id; the answer names the new.
        assert_eq!(end.next.producer_id, pid);
        assert_eq!(end.next.producer_epoch, i16::MAX);
        let (next_pid, next_epoch) = end.next.continued_identity();
        assert_ne!(next_pid, pid);
        assert_eq!(next_epoch, 0);
        // Stored, so a new coordinator completes the same move (the last
        // epoch is kept in memory only, as Kafka's).
        let reloaded = crate::transactions::records::decode_value(
            &crate::transactions::records::value(&end.next),
        );
        let stored = TxnMetadata {
            last_producer_epoch: -1,
            ..end.next.clone()
        };
        assert_eq!(reloaded, Some(stored));
        durable(&mut txns, end);
        // The client writes with the new id at once: told to wait while
        // the markers are written, not refused as an unknown producer.
        let busy = codes(ResponseError::ConcurrentTransactions);
        let first = parts(&[("a", 0)]);
        let add = txns.add_partitions_as("tx", next_pid, 0, &first, 11, 2);
        assert_eq!(add, Err(busy));
        assert_eq!(txns.verify("tx", next_pid, 0, &first[0]), Err(busy));
        let done = complete(&mut txns);
        assert_eq!(
            (done.next.producer_id, done.next.producer_epoch),
            (next_pid, 0)
        );
        assert_eq!(done.next.previous_producer_id, pid);
        assert_eq!(done.next.next_producer_id, -1);
        // The retry with the old id and its last epoch is recognised.
        assert_eq!(
            txns.end_txn_v2("tx", pid, EPOCH_EXHAUSTED, true, 11, &mut ids),
            Ok(None)
        );
        assert_eq!(
            txns.end_txn_v2("tx", pid, 7, true, 11, &mut ids),
            Err(codes(ResponseError::InvalidProducerIdMapping))
        );
        // The new id's transactions go on.
        let add = txns
            .add_partitions_as("tx", next_pid, 0, &parts(&[("a", 0)]), 12, 2)
            .unwrap();
        assert!(add.is_some());
    }

    #[test]
    fn an_epoch_a_fence_took_to_the_last_value_ends_on_a_new_id() {
        let (mut txns, mut ids, pid) = open_at(i16::MAX);
        let end = txns
            .end_txn_v2("tx", pid, i16::MAX, false, 10, &mut ids)
            .unwrap()
            .unwrap();
        assert_eq!(end.next.producer_epoch, i16::MAX);
        let (next_pid, epoch) = end.next.continued_identity();
        assert_ne!(next_pid, pid);
        assert_eq!(epoch, 0);
    }

    #[test]
    fn a_timed_out_transaction_is_aborted_once_and_its_producer_fenced() {
        let (mut txns, mut ids, pid) = open_at(2);
        let aborts = txns.timed_out(5 + TIMEOUT as i64 + 1);
        assert_eq!(aborts.len(), 1);
        assert_eq!(aborts[0].next.producer_epoch, 3);
        durable(&mut txns, aborts[0].clone());
        complete(&mut txns);
        assert_eq!(
            txns.end_txn_v2("tx", pid, 2, true, 100_000, &mut ids),
            Err(codes(ResponseError::InvalidTxnState)),
            "its commit is refused"
        );
        assert_eq!(
            txns.add_partitions_as("tx", pid, 2, &parts(&[("a", 0)]), 100_000, 2),
            Err(codes(ResponseError::ProducerFenced))
        );
    }
}
