//! How long one ACL check takes with the ACLs of scripts/bench-acl.sh
//! (1,002: 500 literal, 500 prefixed, and the two letting the benchmark's
//! client in), for a produce's check (WRITE on a topic matched by prefix),
//! and with no ACLs at all. Prints nanoseconds per check; run with
//! `cargo run --release -p broker --example authorizer_cost`.

use std::collections::BTreeSet;
use std::hint::black_box;
use std::time::Instant;

use broker::security::authorizer::Authorizer;
use control::model::acls::{
    AclBinding, Operation, PatternType, Permission, ResourceType, CLUSTER_NAME,
};

fn acl(
    resource_type: ResourceType,
    name: &str,
    pattern: PatternType,
    principal: &str,
    operation: Operation,
) -> AclBinding {
    AclBinding {
        resource_type,
        resource_name: name.into(),
        pattern,
        principal: principal.into(),
        host: "*".into(),
        operation,
        permission: Permission::Allow,
    }
}

fn bench_acls() -> BTreeSet<AclBinding> {
    let mut acls = BTreeSet::new();
    acls.insert(acl(
        ResourceType::Cluster,
        CLUSTER_NAME,
        PatternType::Literal,
        "User:ANONYMOUS",
        Operation::All,
    ));
    acls.insert(acl(
        ResourceType::Topic,
        "acl-",
        PatternType::Prefixed,
        "User:ANONYMOUS",
        Operation::All,
    ));
    for i in 1..=5 {
        for user in 1..=50 {
            let principal = format!("User:user-{user}");
            for op in [Operation::Read, Operation::Write] {
                acls.insert(acl(
                    ResourceType::Topic,
                    &format!("other-{i}"),
                    PatternType::Literal,
                    &principal,
                    op,
                ));
                acls.insert(acl(
                    ResourceType::Topic,
                    &format!("other-prefix-{i}-"),
                    PatternType::Prefixed,
                    &principal,
                    op,
                ));
            }
        }
    }
    acls
}

fn per_check(authorizer: &Authorizer) -> f64 {
    let checks = 2_000_000;
    let started = Instant::now();
    let mut allowed = 0u32;
    for _ in 0..checks {
        allowed += black_box(authorizer).allows(
            black_box("User:ANONYMOUS"),
            black_box("127.0.0.1"),
            Operation::Write,
            ResourceType::Topic,
            black_box("acl-a"),
        ) as u32;
    }
    assert_eq!(allowed, checks, "every check allowed");
    started.elapsed().as_nanos() as f64 / checks as f64
}

fn main() {
    let acls = bench_acls();
    let full = Authorizer::new(&acls, &[], false);
    let empty = Authorizer::new(&BTreeSet::new(), &[], true);
    println!(
        "{} ACLs: {:.0} ns per produce check",
        acls.len(),
        per_check(&full)
    );
    println!(
        "no ACLs (allow everyone): {:.0} ns per check",
        per_check(&empty)
    );
}
