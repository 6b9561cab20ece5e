//! The AWS branch timer: the state machine definition is checked, and
//! against the emulator (moto's Step Functions interpreter) a real
//! execution of it waits until the branch's deadline and schedules the
//! `branch-expire` invocation; plain moto cannot run the Rust Lambda, so
//! the test takes the exact payload the Task scheduled from the execution
//! history and drives `ctx_lambda::expire` with it. A normal return stops
//! the execution (ABORTED). The whole path with the real binary (moto's
//! interpreter forwarding the invocation to `cargo lambda watch`) is
//! `functions/branch-timer-e2e`, run by tests/run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ctx_core::auth::Caller;
use ctx_core::bootstrap::{Backends, Deadlines};
use ctx_core::branch::NewBranch;
use ctx_core::config::Config;
use ctx_core::store::aws::sfn::SfnTimer;
use ctx_core::{OsRandom, SystemClock};
use ctx_lambda::Function;
use serde_json::{Value, json};

const ASL: &str = include_str!("../../../infra/statemachines/branch-timer.asl.json");

#[test]
fn the_state_machine_waits_for_the_deadline_then_invokes_branch_expire() {
    let asl: Value = serde_json::from_str(ASL).expect("the ASL is JSON");
    let start = asl["StartAt"].as_str().unwrap();
    let wait = &asl["States"][start];
    assert_eq!(wait["Type"], "Wait");
    assert_eq!(wait["TimestampPath"], "$.deadline");
    let task = &asl["States"][wait["Next"].as_str().unwrap()];
    assert_eq!(task["Type"], "Task");
    assert_eq!(task["Resource"], "arn:aws:states:::lambda:invoke");
    assert_eq!(
        task["Parameters"]["Payload.$"], "$",
        "the execution input is the event"
    );
    assert_eq!(
        task["Parameters"]["FunctionName"],
        "${BranchExpireFunctionArn}"
    );
    // The task keeps the input and adds its answer; while the answer
    // names a `next` time (before the deadline: an idle session's check),
    // the execution waits again until then with the same input.
    assert_eq!(task["ResultPath"], "$.result");
    assert_eq!(task["ResultSelector"]["next.$"], "$.Payload.next");
    let choice = &asl["States"][task["Next"].as_str().unwrap()];
    assert_eq!(choice["Type"], "Choice");
    assert_eq!(choice["Choices"][0]["Variable"], "$.result.next");
    assert_eq!(choice["Choices"][0]["IsNull"], false);
    let rearm = &asl["States"][choice["Choices"][0]["Next"].as_str().unwrap()];
    assert_eq!(rearm["Type"], "Pass");
    assert_eq!(rearm["Parameters"]["deadline.$"], "$.result.next");
    assert_eq!(rearm["Parameters"]["tenant.$"], "$.tenant");
    assert_eq!(rearm["Parameters"]["branch_id.$"], "$.branch_id");
    assert_eq!(rearm["Next"], start);
    assert_eq!(
        asl["States"][choice["Default"].as_str().unwrap()]["Type"],
        "Succeed"
    );
    assert_eq!(asl["States"].as_object().unwrap().len(), 5);
    // The template deploys it as Standard with that substitution.
    let t: serde_norway::Value =
        serde_norway::from_str(include_str!("../../../template.yaml")).unwrap();
    let sm = &t["Resources"]["BranchTimerStateMachine"]["Properties"];
    assert_eq!(sm["Type"], serde_norway::Value::from("STANDARD"));
    assert_eq!(
        sm["DefinitionUri"],
        serde_norway::Value::from("infra/statemachines/branch-timer.asl.json")
    );
    assert!(
        !sm["DefinitionSubstitutions"]["BranchExpireFunctionArn"].is_null(),
        "the function ARN is substituted"
    );
}

fn caller() -> Caller {
    Caller {
        tenant: "timer-test".parse().unwrap(),
        principal: Some("tok-timer".into()),
    }
}

async fn poll<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_expires_through_the_state_machine_and_a_return_stops_it() {
    let Some(config) = Config::emulator_from_env() else {
        return;
    };
    let sfn = SfnTimer::sdk_client().await;
    let mut b = [0u8; 6];
    use ctx_core::IdSource as _;
    OsRandom.fill(&mut b);
    let definition = ASL.replace(
        "${BranchExpireFunctionArn}",
        "arn:aws:lambda:us-east-1:123456789012:function:branch-expire",
    );
    let arn = sfn
        .create_state_machine()
        .name(format!("branch-timer-{}", hex(&b)))
        .definition(definition)
        .role_arn("arn:aws:iam::123456789012:role/branch-timer")
        .send()
        .await
        .expect("create the state machine on the emulator")
        .state_machine_arn;
    // Wired as the `branch` function is, with this state machine.
    let config = Config {
        branch_timer_arn: Some(arn),
        ..config
    };
    let backends = Backends::build(&config, Function::Branch.needs())
        .await
        .unwrap();
    assert_eq!(backends.deadlines, Some(Deadlines::StepFunctions));
    let branching = backends
        .branching
        .clone()
        .expect("the branch function folds");
    let service = backends.into_service(Arc::new(SystemClock));
    let session: ctx_core::SessionId = format!("s-{}", hex(&b)).parse().unwrap();
    let create = |d: &str, timeout: u64| NewBranch {
        session_id: session.clone(),
        description: d.into(),
        prompt: None,
        budget: None,
        timeout_seconds: Some(timeout),
        parent_branch: None,
        inject_memories: false,
    };

    // Cancellation: a returned branch's execution is stopped.
    let kept = service
        .branch_create(&caller(), create("returns", 600))
        .await
        .unwrap();
    let rec = branching
        .store
        .get_branch(&caller().tenant, &kept.branch_id)
        .await
        .unwrap()
        .unwrap();
    let kept_exec = rec.timer.clone().expect("the execution ARN is stored");
    let d = sfn
        .describe_execution()
        .execution_arn(&kept_exec)
        .send()
        .await
        .unwrap();
    assert_eq!(d.status().as_str(), "RUNNING");
    service
        .branch_return(&caller(), &kept.branch_id, "done")
        .await
        .unwrap();
    poll("the stopped execution", async || {
        let d = sfn
            .describe_execution()
            .execution_arn(&kept_exec)
            .send()
            .await
            .ok()?;
        (d.status().as_str() == "ABORTED").then_some(())
    })
    .await;

    // Expiry: a 1 s branch's execution waits, then schedules branch-expire.
    let short = service
        .branch_create(&caller(), create("times out", 1))
        .await
        .unwrap();
    let rec = branching
        .store
        .get_branch(&caller().tenant, &short.branch_id)
        .await
        .unwrap()
        .unwrap();
    let exec = rec.timer.clone().unwrap();
    let payload: Value = poll("the scheduled branch-expire task", async || {
        let h = sfn
            .get_execution_history()
            .execution_arn(&exec)
            .send()
            .await
            .ok()?;
        h.events().iter().find_map(|e| {
            let p = e.task_scheduled_event_details()?.parameters();
            let p: Value = serde_json::from_str(p).ok()?;
            Some(p["Payload"].clone())
        })
    })
    .await;
    // Exactly the execution input SfnTimer started it with: what the
    // branch-expire binary is tested with (functions/branch-expire/tests).
    assert_eq!(
        payload,
        serde_json::to_value(ctx_core::store::aws::sfn::TimerInput::new(
            &caller().tenant,
            &short.branch_id,
            short.deadline
        ))
        .unwrap()
    );
    let _ = sfn.stop_execution().execution_arn(&exec).send().await;
    // What branch-expire does with exactly that event.
    let out = ctx_lambda::expire(&service, payload.clone()).await.unwrap();
    assert_eq!(out["outcome"], "timed_out");
    assert_eq!(out["next"], Value::Null, "the execution ends");
    let st = service
        .branch_status(&caller(), &short.branch_id)
        .await
        .unwrap();
    assert_eq!(st.record.status.as_str(), "timeout");
    // Idempotent: a second delivery changes nothing.
    let again = ctx_lambda::expire(&service, payload).await.unwrap();
    assert_eq!(again["outcome"], "already_ended");
    let bad = ctx_lambda::expire(&service, json!({"branch": 1}))
        .await
        .unwrap_err();
    assert_eq!(bad.kind, ctx_core::ErrorKind::Invalid);
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
