//! template.yaml agrees with the code: each function's HttpApi events are
//! exactly the routes its [`Function`] serves, every function is deployed
//! once and its crate runs that function, every variable the template sets
//! is a setting `Config` reads, and the table the emulator creates
//! (localstack/resources.json) has the template's keys.

use std::collections::{BTreeMap, BTreeSet};

use ctx_core::api::routes;
use ctx_core::config::SETTINGS;
use ctx_core::service::Limits;
use ctx_lambda::Function;
use serde_norway::Value;

fn template() -> Value {
    serde_norway::from_str(include_str!("../../../template.yaml")).expect("template.yaml parses")
}

#[path = "support/apigw.rs"]
mod apigw;
use apigw::api_gateway_path;

/// The template's functions by the [`Function`] their binary names.
fn deployed() -> BTreeMap<Function, Value> {
    let t = template();
    let mut out = BTreeMap::new();
    for (name, r) in t["Resources"].as_mapping().expect("Resources") {
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
        let f: Function = binary
            .parse()
            .unwrap_or_else(|_| panic!("{binary} (in {name:?}) is no ctx_lambda::Function"));
        assert!(
            out.insert(f, r.clone()).is_none(),
            "{binary} is deployed twice"
        );
    }
    out
}

#[test]
fn template_routes_equal_the_routes_each_function_serves() {
    let deployed = deployed();
    assert_eq!(
        deployed.keys().copied().collect::<Vec<_>>(),
        Function::ALL.to_vec(),
        "every function is deployed once"
    );
    for (f, r) in &deployed {
        if f.is_invoked() {
            assert!(f.groups().is_empty(), "{f} serves no routes");
            let events = &r["Properties"]["Events"];
            if *f == Function::Summarizer {
                // Its only event is the schedule, whose expression is a
                // parameter.
                let events = events.as_mapping().expect("the summarizer's Events");
                assert_eq!(events.len(), 1, "{f}: {events:?}");
                let (_, ev) = events.iter().next().expect("one event");
                assert_eq!(ev["Type"], Value::from("Schedule"), "{f}");
                let param = ev["Properties"]["Schedule"]["Ref"]
                    .as_str()
                    .or_else(|| match &ev["Properties"]["Schedule"] {
                        Value::Tagged(t) if t.tag == "!Ref" => t.value.as_str(),
                        _ => None,
                    })
                    .expect("the schedule is !Ref a parameter");
                let p = &template()["Parameters"][param];
                assert!(
                    p["Default"]
                        .as_str()
                        .is_some_and(|d| d.starts_with("rate(") || d.starts_with("cron(")),
                    "{param}: {p:?}"
                );
            } else {
                assert!(
                    events.is_null(),
                    "{f} is invoked by Step Functions, not API Gateway"
                );
            }
            continue;
        }
        let mut in_template = BTreeSet::new();
        for (_, ev) in r["Properties"]["Events"].as_mapping().expect("Events") {
            assert_eq!(ev["Type"], Value::from("HttpApi"));
            let p = &ev["Properties"];
            in_template.insert((
                p["Method"].as_str().expect("Method").to_owned(),
                p["Path"].as_str().expect("Path").to_owned(),
            ));
        }
        let mut served: BTreeSet<(String, String)> = routes(&Limits::default())
            .iter()
            .filter(|r| f.groups().contains(&r.group))
            .map(|r| (r.method.to_string(), api_gateway_path(r.path)))
            .collect();
        if f.serves_ui() {
            served.extend(
                ctx_core::ui::GATEWAY_ROUTES
                    .iter()
                    .map(|(m, p)| ((*m).to_owned(), (*p).to_owned())),
            );
            // The pages load before any token: no authorizer on them.
            for (_, ev) in r["Properties"]["Events"].as_mapping().expect("Events") {
                let p = &ev["Properties"];
                if p["Path"].as_str().is_some_and(|p| p.starts_with("/ui")) {
                    assert_eq!(p["Auth"]["Authorizer"], Value::from("NONE"), "{p:?}");
                }
            }
        }
        assert_eq!(in_template, served, "routes of {f}");
    }
    assert_eq!(
        Function::ALL.iter().filter(|f| f.serves_ui()).count(),
        1,
        "one function serves the browser"
    );
    // And every route of the API belongs to exactly one function.
    for r in routes(&Limits::default()) {
        let serving: Vec<Function> = Function::ALL
            .iter()
            .copied()
            .filter(|f| f.groups().contains(&r.group))
            .collect();
        assert_eq!(
            serving.len(),
            1,
            "{} {} is served by {serving:?}",
            r.method,
            r.path
        );
    }
}

#[test]
fn each_function_crate_runs_its_function() {
    let functions = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("functions/common is in functions/");
    for f in Function::ALL {
        let dir = functions.join(f.name());
        let read = |file: &str| {
            std::fs::read_to_string(dir.join(file))
                .unwrap_or_else(|e| panic!("{}/{file}: {e}", f.name()))
        };
        let manifest = read("Cargo.toml");
        assert!(
            manifest.contains(&format!("[[bin]]\nname = \"{}\"\n", f.name())),
            "functions/{f}/Cargo.toml builds the binary {f}"
        );
        let main = read("src/main.rs");
        assert!(
            main.contains(&format!("ctx_lambda::run(Function::{f:?})")),
            "functions/{f}/src/main.rs runs Function::{f:?}"
        );
        assert_eq!(f.name().parse::<Function>().unwrap(), *f);
    }
    assert!("checkpoints".parse::<Function>().is_err());
}

/// A function the template gives a summarizer (`CTX_SUMMARIZER`, which
/// may be `bedrock`) is built with the `bedrock` backend, or it would
/// refuse to start; the others are built without it, and no function has
/// the HTTP backends, which the template does not offer.
#[test]
fn only_the_functions_given_a_summarizer_build_bedrock() {
    let t = template();
    let offered: Vec<&str> = t["Parameters"]["Summarizer"]["AllowedValues"]
        .as_sequence()
        .expect("the Summarizer parameter's values")
        .iter()
        .map(|v| v.as_str().expect("a string"))
        .collect();
    assert_eq!(offered, ["extractive", "bedrock"]);
    let functions = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("functions/common is in functions/");
    for (f, r) in deployed() {
        let summarizes = !r["Properties"]["Environment"]["Variables"]["CTX_SUMMARIZER"].is_null();
        let manifest = std::fs::read_to_string(functions.join(f.name()).join("Cargo.toml"))
            .unwrap_or_else(|e| panic!("functions/{f}/Cargo.toml: {e}"));
        let dep = manifest
            .lines()
            .find(|l| l.starts_with("ctx-lambda"))
            .unwrap_or_else(|| panic!("functions/{f} depends on ctx-lambda"));
        assert_eq!(
            dep.contains("\"summarize-bedrock\""),
            summarizes,
            "functions/{f}: the template gives it CTX_SUMMARIZER: {summarizes}; {dep}"
        );
        assert!(!manifest.contains("summarize-http"), "functions/{f}");
        assert_eq!(summarizes, f.summarizes(), "functions/{f}");
    }
}

#[test]
fn only_the_functions_with_branches_build_branching() {
    for f in Function::ALL {
        let routes_fold = f.groups().iter().any(|g| {
            matches!(
                g,
                ctx_core::api::Group::Checkpoint | ctx_core::api::Group::Branches
            )
        });
        assert_eq!(
            f.needs().branching,
            // branch-expire ends branches; the summarizer's retention
            // erases sessions with their branches.
            routes_fold || matches!(f, Function::BranchExpire | Function::Summarizer),
            "{f}"
        );
        assert!(!f.needs().tokens && !f.needs().process_timers, "{f}");
    }
}

#[test]
fn every_variable_the_template_sets_is_a_setting() {
    let t = template();
    let deployed = deployed();
    let mut sets = vec![&t["Globals"]["Function"]["Environment"]["Variables"]];
    for r in deployed.values() {
        sets.push(&r["Properties"]["Environment"]["Variables"]);
    }
    let mut seen = 0;
    for vars in sets {
        let Some(vars) = vars.as_mapping() else {
            continue;
        };
        for (k, v) in vars {
            let k = k.as_str().expect("a variable name");
            assert!(
                SETTINGS.iter().any(|s| s.var == k),
                "template.yaml sets {k}, which Config does not read"
            );
            // Literal values, and every value a parameter allows, must parse
            // as Config would parse them (a model backend with a model).
            let values: Vec<String> = match v {
                Value::String(v) => vec![v.clone()],
                Value::Tagged(r) if r.tag == "!Ref" => {
                    let param = &t["Parameters"][r.value.as_str().expect("!Ref names")];
                    param["AllowedValues"]
                        .as_sequence()
                        .into_iter()
                        .flatten()
                        .map(|a| a.as_str().expect("string values").to_owned())
                        .collect()
                }
                _ => Vec::new(),
            };
            for v in values {
                ctx_core::config::Config::from_vars(|n| {
                    if n == k {
                        Some(v.clone())
                    } else {
                        (n == "CTX_SUMMARIZER_MODEL").then(|| "a-model".to_owned())
                    }
                })
                .unwrap_or_else(|e| panic!("template.yaml's {k}={v:?}: {}", e.message));
            }
            seen += 1;
        }
    }
    assert!(seen >= 6, "the template's variables were found");
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
