//! Branch deadlines on AWS: each branch_create starts one Standard
//! execution of the branch-timer state machine
//! (`infra/statemachines/branch-timer.asl.json`): Wait until the deadline,
//! then invoke the `branch-expire` function with the execution's input,
//! [`TimerInput`]. A normal return stops the execution.

use async_trait::async_trait;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use super::{SdkPolicy, https_client, sdk_error};
use crate::branch::BranchTimer;
use crate::error::{Error, Result};
use crate::id::{BranchId, TenantId};

/// The input of a branch-timer execution, which its Task passes unchanged
/// to `branch-expire` as the event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimerInput {
    /// The branch's tenant.
    pub tenant: TenantId,
    /// The branch.
    pub branch_id: BranchId,
    /// When it times out (the Wait state's `TimestampPath`), RFC 3339 UTC
    /// with a `Z`, as Step Functions requires.
    pub deadline: String,
}

impl TimerInput {
    /// The input for `branch` of `tenant` due at `deadline` (rounded up to
    /// the second, so the Wait never ends before it).
    pub fn new(tenant: &TenantId, branch: &BranchId, deadline: DateTime<Utc>) -> Self {
        let up = if deadline.timestamp_subsec_micros() > 0 {
            1
        } else {
            0
        };
        let secs =
            DateTime::<Utc>::from_timestamp(deadline.timestamp() + up, 0).unwrap_or(deadline);
        TimerInput {
            tenant: tenant.clone(),
            branch_id: *branch,
            deadline: secs.to_rfc3339_opts(SecondsFormat::Secs, true),
        }
    }
}

/// The execution name of a branch's timer: its id, unique per branch and
/// valid as a name (`[A-Za-z0-9_-]`, at most 80 characters). Starting it
/// again with the same input is idempotent in Step Functions.
pub fn execution_name(branch: &BranchId) -> String {
    branch.to_string()
}

/// Timers as Step Functions executions.
#[derive(Debug, Clone)]
pub struct SfnTimer {
    client: aws_sdk_sfn::Client,
    state_machine_arn: String,
}

impl SfnTimer {
    /// Timers of the state machine `state_machine_arn`.
    pub fn new(client: aws_sdk_sfn::Client, state_machine_arn: String) -> Self {
        SfnTimer {
            client,
            state_machine_arn,
        }
    }

    /// A Step Functions client configured like the S3 and DynamoDB clients
    /// (by the AWS SDK's own variables: credentials, region,
    /// `AWS_ENDPOINT_URL` for an emulator).
    pub async fn sdk_client() -> aws_sdk_sfn::Client {
        let sdk = SdkPolicy::STORES.load(https_client()).await;
        #[allow(unused_mut)] // Only the tests' call log adds to it.
        let mut config = aws_sdk_sfn::config::Builder::from(&sdk);
        #[cfg(any(test, feature = "conformance"))]
        if let Some(i) = super::calls::CallLog::interceptor() {
            config.push_interceptor(i);
        }
        aws_sdk_sfn::Client::from_conf(config.build())
    }

    /// The SDK client.
    pub fn client(&self) -> &aws_sdk_sfn::Client {
        &self.client
    }
}

#[async_trait]
impl BranchTimer for SfnTimer {
    async fn start(
        &self,
        tenant: &TenantId,
        branch: &BranchId,
        deadline: DateTime<Utc>,
    ) -> Result<Option<String>> {
        let input = serde_json::to_string(&TimerInput::new(tenant, branch, deadline))
            .map_err(|e| Error::internal(format!("cannot encode a timer input: {e}")))?;
        let out = self
            .client
            .start_execution()
            .state_machine_arn(&self.state_machine_arn)
            .name(execution_name(branch))
            .input(input)
            .send()
            .await
            .map_err(|e| sdk_error("Step Functions StartExecution", e))?;
        Ok(Some(out.execution_arn))
    }

    async fn stop(
        &self,
        _tenant: &TenantId,
        branch: &BranchId,
        handle: Option<&str>,
    ) -> Result<()> {
        let Some(arn) = handle else {
            return Ok(());
        };
        match self
            .client
            .stop_execution()
            .execution_arn(arn)
            .cause(format!("branch {branch} returned"))
            .send()
            .await
        {
            Ok(_) => Ok(()),
            // Already finished or gone: nothing to stop.
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_execution_does_not_exist()) =>
            {
                Ok(())
            }
            Err(e) => Err(sdk_error("Step Functions StopExecution", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timer_input_is_pinned() {
        let tenant: TenantId = "acme".parse().unwrap();
        let b = BranchId::from_bytes([0xab; 16]);
        let at = crate::clock::micros_to_time(1_790_000_300_123_456);
        let json = serde_json::to_value(TimerInput::new(&tenant, &b, at)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "tenant": "acme",
                "branch_id": "br-abababababababababababababababab",
                "deadline": "2026-09-21T14:18:21Z"
            })
        );
        assert!(execution_name(&b).len() <= 80);
    }
}
