//! The `summarizer` Lambda: invoked by an EventBridge schedule (not by API
//! Gateway) with a scheduled event; summarizes the commits of every tenant
//! that lack a summary, claiming none after a margin before its timeout,
//! and answers the batch's report.

use ctx_lambda::Function;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ctx_lambda::run(Function::Summarizer).await
}
