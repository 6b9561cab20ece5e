//! `ctx tenants erase TENANT`: the operator's erase of a whole tenant,
//! straight on the stores (no server): the embedded data directory, or
//! with `--aws` the table and bucket the Lambdas use (`CTX_TABLE`,
//! `CTX_BUCKET`, the usual AWS region, credentials and endpoint settings).
//!
//! Irreversible, so it refuses to run without `--yes`. A tenant with
//! nothing stored erases nothing and says so (exit 0, zero counts). With
//! the embedded store it takes the data directory's lock, so it refuses
//! while a `ctx serve` uses the directory.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Subcommand;
use ctx_core::bootstrap::{Backends, Needs};
use ctx_core::config::{Config, StoreKind};
use ctx_core::service::TenantErased;
use ctx_core::{Error, Result, SystemClock, TenantId};
use indicatif::{ProgressBar, ProgressStyle};

use crate::{datadir, print_json};

/// `ctx tenants …`.
#[derive(Debug, Subcommand)]
pub(crate) enum TenantsCommand {
    /// Erase everything of TENANT, irreversibly: its tokens, commits,
    /// timelines, refs, pins, agents and saves, branches, cache entries,
    /// and every stored artifact (durable, cached, staged). Other tenants
    /// are untouched. Safe to interrupt and run again: it finishes.
    /// Embedded: stop `ctx serve` on the data directory first.
    Erase {
        /// The tenant.
        tenant: String,
        /// The data directory (embedded store; with --aws, where the
        /// server's bearer tokens are kept).
        #[arg(long, env = ctx_core::config::CTX_DATA.var, default_value = ctx_core::config::DEFAULT_DATA)]
        data: PathBuf,
        /// Erase from the aws store (CTX_TABLE, CTX_BUCKET) instead of the
        /// embedded one.
        #[arg(long)]
        aws: bool,
        /// Confirm: without it nothing is erased.
        #[arg(long)]
        yes: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write the index records an erase and retention read for commits
    /// and branches stored before those indexes existed, on the aws store
    /// (CTX_TABLE, CTX_BUCKET): one pass over the table, run once after
    /// upgrading a deployment. Idempotent and safe beside live traffic;
    /// the embedded store keeps its indexes itself and needs none.
    BackfillIndex {
        /// Only this tenant's records (default: every tenant's).
        #[arg(long)]
        tenant: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `ctx tenants …`.
///
/// # Errors
/// `Invalid` for a malformed tenant, a missing `--yes`, a missing data
/// directory or aws setting; `Conflict` while a server holds the data
/// directory; `Unavailable` when a store fails (run it again).
pub(crate) async fn run(command: TenantsCommand) -> Result<()> {
    match command {
        TenantsCommand::Erase {
            tenant,
            data,
            aws,
            yes,
            json,
        } => erase(&tenant, data, aws, yes, json).await,
        TenantsCommand::BackfillIndex { tenant, json } => backfill_index(tenant, json).await,
    }
}

/// Runs `ctx tenants erase`.
async fn erase(tenant: &str, data: PathBuf, aws: bool, yes: bool, json: bool) -> Result<()> {
    let tenant: TenantId = tenant.parse()?;
    if !yes {
        return Err(Error::invalid(
            "yes",
            format!(
                "erasing tenant {tenant} removes all of its data and cannot be undone; \
                 run again with --yes to confirm"
            ),
        ));
    }
    let mut config = Config::from_env()?;
    config.data = data.clone();
    config.store = if aws {
        StoreKind::Aws
    } else {
        StoreKind::Local
    };
    // Tokens: in the data directory (both stores keep them there); with
    // --aws a missing directory just has none.
    let tokens = data.is_dir();
    let _lock = if aws {
        None
    } else {
        datadir::existing(&data)?;
        Some(datadir::lock(&data)?)
    };
    let backends = Backends::build(
        &config,
        Needs {
            tokens,
            ..Needs::default()
        },
    )
    .await?;
    let token_store = backends.tokens.clone();
    let service = backends.into_service(Arc::new(SystemClock));
    // Drawn on stderr only when it is a terminal.
    let bar = ProgressBar::no_length().with_style(
        ProgressStyle::with_template("{spinner} erasing {msg}")
            .map_err(|e| Error::internal(format!("progress template: {e}")))?,
    );
    bar.set_message(tenant.to_string());
    let erased = service
        .erase_tenant(&tenant, token_store.as_deref(), |p| {
            bar.set_message(format!(
                "{tenant}: {} tokens, {} records, {} objects removed",
                p.tokens,
                p.records.total(),
                p.blobs
            ));
            bar.tick();
        })
        .await?;
    bar.finish_and_clear();
    if json {
        return print_json(&erased);
    }
    outln!("{}", describe(&erased));
    Ok(())
}

/// Runs `ctx tenants backfill-index`.
async fn backfill_index(tenant: Option<String>, json: bool) -> Result<()> {
    let tenant: Option<TenantId> = tenant.map(|t| t.parse()).transpose()?;
    let mut config = Config::from_env()?;
    config.store = StoreKind::Aws;
    let backends = Backends::build(&config, Needs::default()).await?;
    // Drawn on stderr only when it is a terminal.
    let bar = ProgressBar::new_spinner();
    bar.set_message("scanning the table");
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let done = backends.stores.meta.backfill_index(tenant.as_ref()).await?;
    bar.finish_and_clear();
    if json {
        return print_json(&done);
    }
    outln!(
        "read {} commits and {} branch records; wrote {} index entries; {} deleted meanwhile",
        done.commits,
        done.branches,
        done.entries,
        done.gone
    );
    Ok(())
}

/// The one line `ctx tenants erase` prints.
fn describe(e: &TenantErased) -> String {
    if e.is_empty() {
        return format!("tenant {} had nothing to erase", e.tenant);
    }
    let r = &e.records;
    format!(
        "tenant {} erased: {} tokens, {} commits, {} refs, {} cache entries, {} agent records and saves, {} branch records, {} other records (timelines, indexes, pins), {} stored objects",
        e.tenant, e.tokens, r.commits, r.refs, r.cache, r.agents, r.branches, r.other, e.blobs
    )
}
