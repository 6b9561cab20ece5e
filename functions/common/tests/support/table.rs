//! A DynamoDB table of a test's own on the emulator, with the template's
//! keys (localstack/resources.json, which a test keeps equal to
//! template.yaml): for tests of the summarizer, which works on every tenant
//! of its table and so must not share one with tests counting commits.
//! Included by path from the tests of ctx-lambda and of the summarizer.

use ctx_core::config::Config;
use ctx_core::store::conformance::fresh_tenant;
use serde_json::Value;

/// `config` with a new, empty table of the template's shape.
pub async fn own_table(config: &Config) -> Config {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
        Projection, ProjectionType, ScalarAttributeType,
    };
    let resources: Value =
        serde_json::from_str(include_str!("../../../../localstack/resources.json")).unwrap();
    let spec = &resources["table"];
    let keys = |v: &Value| -> Vec<KeySchemaElement> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|k| {
                KeySchemaElement::builder()
                    .attribute_name(k["AttributeName"].as_str().unwrap())
                    .key_type(KeyType::from(k["KeyType"].as_str().unwrap()))
                    .build()
                    .unwrap()
            })
            .collect()
    };
    let (_, meta) = ctx_core::store::aws::connect(
        &config.aws().unwrap(),
        ctx_core::store::aws::AwsHooks::default(),
    )
    .await
    .unwrap();
    let name = fresh_tenant("summarizer-table").to_string();
    let mut create = meta
        .client()
        .create_table()
        .table_name(&name)
        .billing_mode(BillingMode::PayPerRequest)
        .set_key_schema(Some(keys(&spec["KeySchema"])));
    for a in spec["AttributeDefinitions"].as_array().unwrap() {
        create = create.attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(a["AttributeName"].as_str().unwrap())
                .attribute_type(ScalarAttributeType::from(
                    a["AttributeType"].as_str().unwrap(),
                ))
                .build()
                .unwrap(),
        );
    }
    for g in spec["GlobalSecondaryIndexes"].as_array().unwrap() {
        let projection = g["Projection"]["ProjectionType"].as_str().unwrap();
        create = create.global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(g["IndexName"].as_str().unwrap())
                .set_key_schema(Some(keys(&g["KeySchema"])))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::from(projection))
                        .build(),
                )
                .build()
                .unwrap(),
        );
    }
    create.send().await.expect("the emulator creates the table");
    Config {
        table: Some(name),
        ..config.clone()
    }
}
