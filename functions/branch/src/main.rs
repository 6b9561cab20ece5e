//! The `branch` Lambda: serves its routes of the shared router (see
//! `ctx_lambda::FUNCTIONS`).

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ctx_lambda::run("branch").await
}
