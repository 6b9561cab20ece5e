//! The `checkpoint` Lambda: serves its routes of the shared router (see
//! `ctx_lambda::Function::groups`).

use ctx_lambda::Function;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    ctx_lambda::run(Function::Checkpoint).await
}
