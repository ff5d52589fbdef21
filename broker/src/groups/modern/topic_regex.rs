//! Subscriptions by regular expression (KIP-848's
//! `subscribed_topic_regex`): Kafka compiles them with RE2/J and matches
//! whole topic names; here the `regex` crate's own parts do (RE2's
//! syntax and linear-time matching: `regex-syntax` parses, the syntax
//! tree is anchored at both ends, `regex-automata` compiles it). Differences
//! a user may meet are in docs/consumer-groups.md ("Regular
//! expressions"). Compiled patterns are kept per thread (a heartbeat
//! names its pattern again and again), a bounded number of them.

use std::cell::RefCell;
use std::collections::HashMap;

use kafka_protocol::ResponseError;
use regex_automata::meta::{Config, Regex};
use regex_syntax::hir::{Hir, Look};
use regex_syntax::ParserBuilder;

use crate::kafka::Code;

/// The most compiled patterns kept per thread (all dropped when full).
const CACHED: usize = 256;

/// The most memory one compiled pattern may take: a pattern comes from a
/// client, so its size is bounded before it is built.
const COMPILED_BYTES: usize = 1 << 20;

thread_local! {
    static COMPILED: RefCell<HashMap<String, Regex>> = RefCell::new(HashMap::new());
}

/// The pattern compiled as Kafka matches it (the whole name), or
/// INVALID_REGULAR_EXPRESSION. The pattern is parsed on its own and the
/// anchors put around its syntax tree, not its text, so no text of the
/// pattern can reach past them (`a)|(b` is refused, not read as two
/// half-anchored alternatives).
fn compiled(pattern: &str) -> Result<Regex, Code> {
    COMPILED.with(|cache| {
        if let Some(regex) = cache.borrow().get(pattern) {
            return Ok(regex.clone());
        }
        let invalid = |_| ResponseError::InvalidRegularExpression.code();
        let hir = ParserBuilder::new()
            .build()
            .parse(pattern)
            .map_err(invalid)?;
        let whole = Hir::concat(vec![Hir::look(Look::Start), hir, Hir::look(Look::End)]);
        let regex = Regex::builder()
            .configure(Config::new().nfa_size_limit(Some(COMPILED_BYTES)))
            .build_from_hir(&whole)
            .map_err(|_| ResponseError::InvalidRegularExpression.code())?;
        let mut cache = cache.borrow_mut();
        if cache.len() >= CACHED {
            cache.clear();
        }
        cache.insert(pattern.to_string(), regex.clone());
        Ok(regex)
    })
}

/// INVALID_REGULAR_EXPRESSION if `pattern` does not compile.
pub fn check(pattern: &str) -> Result<(), Code> {
    compiled(pattern).map(drop)
}

/// Whether topic `name` matches `pattern` (a pattern that does not
/// compile matches nothing: it was refused when it was subscribed).
pub fn matches(pattern: &str, name: &str) -> bool {
    compiled(pattern).is_ok_and(|regex| regex.is_match(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_names_and_bad_ones_are_refused() {
        assert!(matches("orders-.*", "orders-eu"));
        assert!(
            !matches("orders", "orders-eu"),
            "the whole name, as Kafka's"
        );
        assert!(!matches("eu", "orders-eu"));
        assert!(matches("a|b", "b"), "alternation stays inside the anchors");
        assert!(!matches("a|b", "ab"));
        assert!(
            matches("^orders-\\d+$", "orders-12"),
            "anchors given are harmless"
        );
        let invalid = Err(ResponseError::InvalidRegularExpression.code());
        assert_eq!(check("orders-("), invalid);
        assert_eq!(check("(?<=x)y"), invalid, "look-behind is not RE2");
        assert_eq!(check("x{1000}{1000}"), invalid, "too big to build");
        assert_eq!(check("\\Qa.b\\E"), invalid, "no RE2 quoting (docs say so)");
        assert!(!matches("orders-(", "orders-("));
        // Text that would close the anchoring group is refused, not run.
        assert_eq!(check("orders)|(.*"), invalid);
        assert_eq!(check("a)|(b"), invalid);
        // A verbose pattern's comment ends the pattern, not the anchors.
        assert!(matches("(?x) orders - [a-z]+  # the regions", "orders-eu"));
    }
}
