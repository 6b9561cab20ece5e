//! template.yaml agrees with the code: each function's HttpApi events are
//! exactly the routes it serves, every function is deployed, and the table
//! the emulator creates (localstack/resources.json) has the template's keys.

use std::collections::BTreeSet;

use ctx_core::api::routes;
use ctx_core::service::Limits;
use ctx_lambda::{FUNCTIONS, INVOKED, groups_of};
use serde_yaml::Value;

fn template() -> Value {
    serde_yaml::from_str(include_str!("../../../template.yaml")).expect("template.yaml parses")
}

/// axum's `{*name}` is API Gateway's greedy `{name+}`.
fn api_gateway_path(axum_path: &str) -> String {
    match axum_path.split_once("{*") {
        Some((head, tail)) => format!("{head}{{{}+}}", tail.trim_end_matches('}')),
        None => axum_path.to_owned(),
    }
}

#[test]
fn template_routes_equal_the_routes_each_function_serves() {
    let t = template();
    let resources = t["Resources"].as_mapping().expect("Resources");
    let mut deployed = BTreeSet::new();
    let mut invoked = BTreeSet::new();
    for (name, r) in resources {
        if r["Type"] != "AWS::Serverless::Function" {
            continue;
        }
        let binary = r["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .unwrap_or_else(|| panic!("{name:?} names no binary"));
        assert_eq!(
            r["Metadata"]["BuildMethod"],
            Value::from("rust-cargolambda")
        );
        if INVOKED.contains(&binary) {
            assert!(
                r["Properties"]["Events"].is_null(),
                "{binary} is invoked by Step Functions, not API Gateway"
            );
            invoked.insert(binary.to_owned());
            continue;
        }
        deployed.insert(binary.to_owned());
        let mut in_template = BTreeSet::new();
        for (_, ev) in r["Properties"]["Events"].as_mapping().expect("Events") {
            assert_eq!(ev["Type"], Value::from("HttpApi"));
            let p = &ev["Properties"];
            in_template.insert((
                p["Method"].as_str().expect("Method").to_owned(),
                p["Path"].as_str().expect("Path").to_owned(),
            ));
        }
        let groups = groups_of(binary).expect("a known function");
        let served: BTreeSet<(String, String)> = routes(&Limits::default())
            .iter()
            .filter(|r| groups.contains(&r.group))
            .map(|r| (r.method.to_string(), api_gateway_path(r.path)))
            .collect();
        assert_eq!(in_template, served, "routes of {binary}");
    }
    let expected: BTreeSet<String> = FUNCTIONS.iter().map(|(n, _)| (*n).to_owned()).collect();
    assert_eq!(deployed, expected, "every function is deployed once");
    let expected: BTreeSet<String> = INVOKED.iter().map(|n| (*n).to_owned()).collect();
    assert_eq!(invoked, expected, "every invoked function is deployed once");
    // And every route of the API belongs to some function.
    let all: usize = FUNCTIONS
        .iter()
        .map(|(_, g)| {
            routes(&Limits::default())
                .iter()
                .filter(|r| g.contains(&r.group))
                .count()
        })
        .sum();
    assert_eq!(all, routes(&Limits::default()).len());
}

#[test]
fn functions_are_arm64_al2023_and_the_storage_is_locked_down() {
    let t = template();
    let f = &t["Globals"]["Function"];
    assert_eq!(f["Runtime"], Value::from("provided.al2023"));
    assert_eq!(f["Architectures"][0], Value::from("arm64"));
    let bucket = &t["Resources"]["ArtifactBucket"]["Properties"];
    assert_eq!(
        bucket["VersioningConfiguration"]["Status"],
        Value::from("Enabled")
    );
    for k in [
        "BlockPublicAcls",
        "BlockPublicPolicy",
        "IgnorePublicAcls",
        "RestrictPublicBuckets",
    ] {
        assert_eq!(
            bucket["PublicAccessBlockConfiguration"][k],
            Value::from(true),
            "{k}"
        );
    }
    let table = &t["Resources"]["MetaTable"]["Properties"];
    assert_eq!(table["BillingMode"], Value::from("PAY_PER_REQUEST"));
    assert_eq!(
        table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"],
        Value::from(true)
    );
}

#[test]
fn the_emulator_table_has_the_template_keys() {
    let t = template();
    let table = &t["Resources"]["MetaTable"]["Properties"];
    let resources: serde_json::Value =
        serde_json::from_str(include_str!("../../../localstack/resources.json"))
            .expect("resources.json");
    let as_json = |v: &Value| serde_json::to_value(v).expect("plain YAML converts");
    for key in [
        "AttributeDefinitions",
        "KeySchema",
        "GlobalSecondaryIndexes",
        "BillingMode",
    ] {
        assert_eq!(as_json(&table[key]), resources["table"][key], "{key}");
    }
}
