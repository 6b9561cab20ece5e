//! The `branch-expire` Lambda: invoked by the branch-timer state machine
//! (not by API Gateway) with `{tenant, branch_id, deadline}` once a
//! branch's deadline has passed; force-returns it with status timeout if it
//! is still active (idempotent).

use ctx_lambda::Function;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ctx_lambda::run(Function::BranchExpire).await
}
