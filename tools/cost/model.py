#!/usr/bin/env python3
"""The cost model of ctx on AWS: writes docs/cost.md.

Reads AWS list prices (tools/cost/prices.toml) and the workload
(tools/cost/workload.toml: the items each operation writes and reads, the
requests it makes, the fleet), prices every operation, and writes the
document. Python 3.11 standard library only.

    python3 tools/cost/model.py            # regenerate docs/cost.md
    python3 tools/cost/model.py --check    # fail if docs/cost.md differs

DynamoDB arithmetic, as AWS bills it: an item's size is the sum of its
attribute names and values; a write request unit (WRU) writes 1 KB (a
transactional write costs 2), a read request unit (RRU) reads 4 KB
strongly consistent (eventually consistent costs half); a Query rounds the
sum of the items it returns, a GetItem each item. A global secondary index
entry costs 1 WRU per KB of the entry. API Gateway HTTP API requests are
metered in 512 KB increments.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TIMER_ASL = ROOT / "infra" / "statemachines" / "branch-timer.asl.json"
IDLE_SETTING = "CTX_SESSION_IDLE_SECS"
DOC = ROOT / "docs" / "cost.md"
KB = 1024
MB = 1024 * 1024
GB = 1024**3
MILLION = 1_000_000
# A DynamoDB partition serves about this many write and read units a second.
PARTITION_WRU = 1000
PARTITION_RRU = 3000
# The default per-table throughput quota of an on-demand table (adjustable
# through Service Quotas).
TABLE_QUOTA_WRU = 40_000
# Every item (and index entry) is stored with this overhead.
ITEM_OVERHEAD = 100
# The most a synchronous Lambda answers.
LAMBDA_RESPONSE_LIMIT = 6 * MB
TARGET_CHECKPOINT = 5.0
TARGET_FLEET_RATIO = 5.0
TARGET_TENANT_CPS = 10_000


def load(path: Path) -> dict:
    with path.open("rb") as f:
        return tomllib.load(f)


CONFIG_GUIDE = ROOT / "docs" / "config.md"
# The setting that holds DynamoDB's inline threshold.
INLINE_SETTING = "CTX_DYNAMODB_INLINE_DELTA_BYTES"


def configured_default(var: str) -> int:
    """The default of `var` in docs/config.md's Config table (a config test
    keeps that row equal to the code's default)."""
    for line in CONFIG_GUIDE.read_text().splitlines():
        if line.startswith(f"| `{var}` |"):
            return int(line.split("|")[3].strip())
    raise SystemExit(f"docs/config.md has no row for {var}")


def load_workload(path: Path) -> dict:
    """workload.toml, with today's inline threshold from the Config table."""
    w = load(path)
    w["delta"]["current_inline_threshold"] = configured_default(INLINE_SETTING)
    w["branch_timer"]["idle_secs"] = configured_default(IDLE_SETTING)
    return w


# ---------------------------------------------------------------------------
# DynamoDB sizes and units


class Blob:
    """A binary attribute of `n` bytes (the delta as stored), not allocated."""

    def __init__(self, n: int):
        self.n = n


def number_size(n: float) -> int:
    """DynamoDB's size of a number: 1 byte per 2 significant digits, + 1."""
    digits = str(abs(n)).replace(".", "").lstrip("0").rstrip("0")
    return math.ceil(max(len(digits), 1) / 2) + 1


def value_size(v) -> int:
    """The size of one attribute value by DynamoDB's rules."""
    if v is None or isinstance(v, bool):
        return 1
    if isinstance(v, (int, float)):
        return number_size(v)
    if isinstance(v, Blob):
        return v.n
    if isinstance(v, str):
        return len(v.encode())
    if isinstance(v, dict):
        return 3 + sum(len(k.encode()) + value_size(x) + 1 for k, x in v.items())
    if isinstance(v, list):
        return 3 + sum(value_size(x) + 1 for x in v)
    raise TypeError(f"no DynamoDB size for {v!r}")


def item_size(attrs: dict) -> int:
    """The size of an item: its attribute names and values."""
    return sum(len(k.encode()) + value_size(v) for k, v in attrs.items())


def wru(size: int, transactional: bool = False) -> int:
    """Write units of writing an item of `size` bytes (1 per KB, rounded up)."""
    return math.ceil(size / KB) * (2 if transactional else 1)


def rru(size: int, consistent: bool = True) -> float:
    """Read units of reading `size` bytes (1 per 4 KB strongly consistent)."""
    units = max(math.ceil(size / (4 * KB)), 1)
    return units if consistent else units / 2


def api_units(size: int, unit: int) -> int:
    """API Gateway HTTP API requests metered: one per `unit` bytes started."""
    return max(math.ceil(size / unit), 1)


def packed(delta: int, ratio: float) -> int:
    """The bytes stored inline: zstd-packed when that saves an eighth."""
    return math.ceil(delta * ratio) if ratio <= 7 / 8 else delta


# ---------------------------------------------------------------------------
# Usage and prices


@dataclass
class Usage:
    """What one operation consumes, by billing unit."""

    api: float = 0.0  # API Gateway metered requests
    lambda_requests: float = 0.0
    lambda_gb_s: float = 0.0
    wru: float = 0.0  # DynamoDB write units
    rru: float = 0.0  # DynamoDB read units
    s3_put: float = 0.0  # PUT, COPY, POST, LIST
    s3_get: float = 0.0  # GET, HEAD
    tokens_in: float = 0.0
    tokens_out: float = 0.0

    def __add__(self, o: Usage) -> Usage:
        return Usage(
            *(getattr(self, f.name) + getattr(o, f.name) for f in fields(self))
        )

    def __mul__(self, k: float) -> Usage:
        return Usage(*(getattr(self, f.name) * k for f in fields(self)))


def lam(mb: int, ms: float) -> Usage:
    """One invocation of `ms` (billed per 1 ms, rounded up) at `mb` MB."""
    return Usage(lambda_requests=1, lambda_gb_s=mb / 1024 * math.ceil(ms) / 1000)


PARTS = ("API Gateway", "Lambda", "DynamoDB", "S3", "Bedrock")


class Prices:
    def __init__(self, p: dict, capacity: str = "on_demand", utilization: float = 0.6):
        self.p = p
        self.capacity = capacity
        d = p["dynamodb"]
        if capacity == "on_demand":
            self.per_wru = d["on_demand_write_per_million"] / MILLION
            self.per_rru = d["on_demand_read_per_million"] / MILLION
        else:
            # A WCU gives one write unit a second for an hour; used at
            # `utilization`, each unit consumed costs 1 / utilization of it.
            self.per_wru = d["provisioned_wcu_hour"] / 3600 / utilization
            self.per_rru = d["provisioned_rcu_hour"] / 3600 / utilization

    def parts(self, u: Usage, model: str = "claude-3-haiku") -> dict[str, float]:
        p = self.p
        b = p["bedrock"][model]
        return {
            "API Gateway": u.api * p["api_gateway"]["http_per_million"] / MILLION,
            "Lambda": u.lambda_requests * p["lambda"]["requests_per_million"] / MILLION
            + u.lambda_gb_s * p["lambda"]["arm64_per_gb_second"],
            "DynamoDB": u.wru * self.per_wru + u.rru * self.per_rru,
            "S3": u.s3_put * p["s3"]["put_per_thousand"] / 1000
            + u.s3_get * p["s3"]["get_per_thousand"] / 1000,
            "Bedrock": u.tokens_in * b["input_per_thousand"] / 1000
            + u.tokens_out * b["output_per_thousand"] / 1000,
        }

    def total(self, u: Usage, model: str = "claude-3-haiku") -> float:
        return sum(self.parts(u, model).values())


# ---------------------------------------------------------------------------
# The workload's items


class Model:
    def __init__(self, prices: dict, workload: dict):
        self.prices = prices
        self.w = workload
        self.on_demand = Prices(prices)
        self.provisioned = Prices(prices, "provisioned")
        self.unit = prices["api_gateway"]["metering_unit_bytes"]
        self._sizes: dict[tuple, int] = {}

    # -- items

    def attrs(self, name: str, inline: int, extra: dict | None = None) -> dict:
        """The example item `name` with `inline` bytes inline (0: none)."""
        return self.expand(self.w["items"][name]["attrs"], inline, extra)

    def sized(self, name: str, inline: int, extra: dict | None = None) -> int:
        """The size of [`attrs`] (memoized: the model asks often)."""
        key = (name, inline, repr(extra))
        if key not in self._sizes:
            self._sizes[key] = item_size(self.attrs(name, inline, extra))
        return self._sizes[key]

    def expand(self, attrs: dict, inline: int, extra: dict | None = None) -> dict:
        out = {}
        for k, v in attrs.items():
            if v == "<inline>":
                if inline:
                    out[k] = Blob(inline)
            elif v == "<null>":
                out[k] = None
            elif v == "<commit>":
                c = self.expand(self.w["commit"], 0)
                if extra:
                    c.update(extra)
                out[k] = c
            elif isinstance(v, dict):
                out[k] = self.expand(v, inline)
            else:
                out[k] = v
        return out

    def size(self, name: str, inline: int) -> int:
        return self.sized(name, inline)

    def gsi_size(self, name: str, inline: int) -> int:
        g = self.w["gsi"][name]
        if g["projection"] == "ALL":
            return self.sized(g["of"], inline)
        key = ("gsi:" + name, 0, "")
        if key not in self._sizes:
            attrs = self.attrs(g["of"], 0)
            self._sizes[key] = item_size({k: attrs[k] for k in g["keys"]})
        return self._sizes[key]

    def stored(self, delta: int, threshold: int, ratio: float) -> int:
        """Inline bytes of a delta (0 when it goes to S3)."""
        return packed(delta, ratio) if 0 < delta <= threshold else 0

    # -- checkpoint

    def checkpoint(self, path: str, delta: int, threshold: int, ratio: float) -> Usage:
        pth = self.w["paths"][path]
        inline = self.stored(delta, threshold, ratio)
        u = Usage()
        for it in pth["tx"]:
            u.wru += wru(self.size(it, inline), True)
        for it in pth["put"]:
            u.wru += wru(self.size(it, inline))
        for g in pth["gsi"]:
            u.wru += wru(self.gsi_size(g, inline))
        for it in pth["reads"]:
            u.rru += rru(self.size(it, inline))
        if not inline:
            u.s3_put += 1
        # The request: the JSON body carries the delta (text) and ~600 bytes
        # of fields.
        u.api += api_units(delta + 600, self.unit)
        lm = self.w["lambda"]
        return u + lam(lm["checkpoint_mb"], lm["checkpoint_ms"])

    def checkpoint_items(
        self, path: str, inline: int
    ) -> list[tuple[str, str, int, int]]:
        """(item, how, bytes, WRU) of one checkpoint."""
        pth = self.w["paths"][path]
        rows = []
        for it in pth["tx"]:
            s = self.size(it, inline)
            rows.append((it, "TransactWriteItems", s, wru(s, True)))
        for it in pth["put"]:
            s = self.size(it, inline)
            rows.append((it, "PutItem", s, wru(s)))
        for g in pth["gsi"]:
            s = self.gsi_size(g, inline)
            rows.append((g, "index entry", s, wru(s)))
        return rows

    # -- summary queue

    def summary(
        self, path: str, delta: int, threshold: int, ratio: float, bedrock: bool
    ) -> Usage:
        pth = self.w["paths"][path]
        sm = self.w["summary"]
        inline = self.stored(delta, threshold, ratio)
        u = Usage()
        claim_extra = {"tags": {"summarizing": "1795702020123456"}}
        done_extra = {
            "summary": "x" * sm["summary_bytes"],
            "tags": {"summary_by": "x" * (sm["tags_bytes"] - 10)},
        }
        for it in pth["summary"]:
            base = self.size(it, inline)
            claimed = self.sized(it, inline, claim_extra) + len("lease") + 9
            done = self.sized(it, inline, done_extra)
            # Two TransactWriteItems (claim, summary), each Update costing
            # the larger of the item before and after.
            u.wru += wru(max(base, claimed), True) + wru(max(claimed, done), True)
        g = pth["summary_gsi"]
        if g:
            entry = self.gsi_size(g, inline)
            if self.w["gsi"][g]["projection"] == "ALL":
                # The claim changes projected attributes: the entry is
                # rewritten; the summary removes it.
                u.wru += wru(entry + 40) + wru(entry + 40)
                u.rru += entry / (4 * KB) / 2
            else:
                u.wru += wru(entry)
                # Keys only: the commit is read for its delta.
                u.rru += entry / (4 * KB) / 2 + rru(
                    self.size(pth["summary"][0], inline)
                )
        if not inline:
            u.s3_get += 1
        lm = self.w["lambda"]
        ms = lm["summary_extractive_ms"]
        if bedrock:
            ms += lm["summary_bedrock_model_ms"]
            u.tokens_in += sm["prompt_tokens"] + min(
                delta / sm["bytes_per_token"], sm["max_input_tokens"]
            )
            u.tokens_out += sm["output_tokens"]
        return u + lam(lm["summarizer_mb"], ms / lm["summary_concurrency"])

    # -- erase (retention)

    def erase(self, path: str, delta: int, threshold: int, ratio: float) -> Usage:
        pth = self.w["paths"][path]
        e = self.w["erase"]
        inline = self.stored(delta, threshold, ratio)
        summarized = {"summary": "x" * self.w["summary"]["summary_bytes"]}
        u = Usage()
        commit_item = pth["reads"][0]
        u.rru += (e["batch_get"] + e["get_item"]) * rru(
            self.sized(commit_item, inline, summarized)
        )
        u.rru += e["query"] * 1
        for it in pth["tx"] + pth["put"]:
            if it.startswith(("ref", "session_last")):
                continue  # refs and a session's last write are not per commit
            u.wru += wru(self.sized(it, inline, summarized), True)
        for g in pth["gsi"]:
            if g.startswith("missing_summary"):
                continue  # removed when the commit was summarized
            u.wru += wru(self.gsi_size(g, inline))
        u.s3_get += e["head_object"]
        if not inline:
            u.s3_put += 1  # ListObjectVersions; DeleteObject is free
        lm = self.w["lambda"]
        return u + lam(
            lm["summarizer_mb"], lm["erase_commit_ms"] / lm["erase_concurrency"]
        )

    # -- storage

    def at_rest(
        self, path: str, delta: int, threshold: int, ratio: float
    ) -> tuple[int, int, int]:
        """(table bytes, index bytes, S3 bytes) one summarized commit keeps."""
        pth = self.w["paths"][path]
        inline = self.stored(delta, threshold, ratio)
        summarized = {"summary": "x" * self.w["summary"]["summary_bytes"]}
        table = 0
        for it in pth["tx"] + pth["put"]:
            if it.startswith(("ref", "session_last")):
                continue  # one per session, not per commit
            table += self.sized(it, inline, summarized) + ITEM_OVERHEAD
        index = sum(
            self.gsi_size(g, inline) + ITEM_OVERHEAD
            for g in pth["gsi"]
            if not g.startswith("missing_summary")
        )
        return table, index, 0 if inline else delta

    def storage_month(
        self, path: str, delta: int, threshold: int, ratio: float
    ) -> dict[str, float]:
        """Dollars a month one summarized commit costs at rest, by part."""
        table, index, s3 = self.at_rest(path, delta, threshold, ratio)
        d = self.prices["dynamodb"]
        return {
            "DynamoDB": (table + index) / GB * d["storage_gb_month"],
            "PITR": table / GB * d["pitr_gb_month"],
            "S3": s3 / GB * self.prices["s3"]["storage_gb_month"],
        }

    # -- materialize, resolve, download (today's items)

    def probes(self, depth: int) -> int:
        n, k = 0, 1
        while (1 << k) < depth + 1 and n < self.w["materialize"]["max_probes"]:
            n += 1
            k += 1
        return n

    def cache_write(self, tip: int) -> Usage:
        u = Usage(s3_put=1)
        u.wru += wru(self.size("cache_entry", 0), True) + wru(
            self.size("cache_user", 0), True
        )
        if self.w["materialize"]["condition_check_as_write"]:
            u.wru += wru(tip, True)
        return u

    def materialize(
        self, kind: str, depth: int, delta: int, threshold: int, ratio: float
    ) -> Usage:
        inline = self.stored(delta, threshold, ratio)
        tip = self.size("commit_by_id", inline)
        lm = self.w["lambda"]
        u = Usage(api=1)
        if kind == "warm":
            u.rru += rru(tip) + rru(self.size("cache_entry", 0))
            u.s3_get += 1
            return u + lam(lm["materialize_mb"], lm["materialize_warm_ms"])
        if kind == "next":
            u.rru += rru(tip) + 1 + rru(self.size("cache_entry", 0))
            u.s3_get += 1 + (0 if inline else 1)
            return (
                u
                + self.cache_write(tip)
                + lam(lm["materialize_mb"], lm["materialize_next_ms"])
            )
        # cold: the tip, the cache and the parent's cache (misses), the
        # probes (misses), the run in 1 MB pages, a GET per delta in S3.
        u.rru += rru(tip) + 2 + self.probes(depth)
        run = (depth + 1) * self.size("commit_in_run", inline)
        pages = math.ceil(run / self.w["materialize"]["query_page_bytes"])
        u.rru += rru(run)
        if not inline:
            u.s3_get += depth + 1
        context = (depth + 1) * delta
        ms = (
            lm["materialize_cold_base_ms"]
            + pages * lm["materialize_cold_page_ms"]
            + context / MB * lm["materialize_cold_mb_ms"]
        )
        return u + self.cache_write(tip) + lam(lm["materialize_mb"], ms)

    def download(self, size: int) -> Usage:
        """GET /v1/artifacts/{art} of `size` bytes: through the function up
        to 6 MB, by presigned S3 URL above (issue 24 item 2)."""
        lm = self.w["lambda"]
        if size <= LAMBDA_RESPONSE_LIMIT:
            u = Usage(api=api_units(size, self.unit), s3_get=1)
            return u + lam(
                lm["download_mb"],
                lm["download_base_ms"] + size / MB * lm["download_mb_ms"],
            )
        return Usage(api=1, s3_get=2) + lam(lm["download_mb"], lm["download_base_ms"])

    def resolve_op(self) -> Usage:
        lm = self.w["lambda"]
        r = self.w["resolve"]
        reads = r["requests"]["Query"] * rru(self.size(r["item"], 0))
        return Usage(api=1, rru=reads) + lam(lm["resolve_mb"], lm["resolve_ms"])

    # -- ceilings

    def ceiling(self, path: str, delta: int, threshold: int, ratio: float) -> dict:
        """Checkpoints a second one tenant can write, by its hottest key."""
        pth = self.w["paths"][path]
        inline = self.stored(delta, threshold, ratio)
        load: dict[str, list] = {}  # partition -> [capacity, wru, rru]

        def add(meta: dict, w: float = 0, r: float = 0):
            scope = meta["scope"]
            if not scope.startswith("tenant"):
                return
            shards = int(scope.split("/")[1]) if "/" in scope else 1
            key = meta.get("partition", scope)
            entry = load.setdefault(key, [shards, 0.0, 0.0])
            entry[1] += w
            entry[2] += r

        items = self.w["items"]
        for it in pth["tx"]:
            add(items[it], w=wru(self.size(it, inline), True))
        for it in pth["put"]:
            add(items[it], w=wru(self.size(it, inline)))
        for g in pth["gsi"]:
            add(self.w["gsi"][g], w=wru(self.gsi_size(g, inline)))
        for it in pth["reads"]:
            add(items[it], r=rru(self.size(it, inline)))
        limits = []
        for key, (shards, w, r) in sorted(load.items()):
            cps = math.inf
            if w:
                cps = min(cps, shards * PARTITION_WRU / w)
            if r:
                cps = min(cps, shards * PARTITION_RRU / r)
            limits.append((key, shards, w, r, cps))
        key_cps = min((x[4] for x in limits), default=math.inf)
        base_wru = self.checkpoint(path, delta, threshold, ratio).wru - sum(
            wru(self.gsi_size(g, inline)) for g in pth["gsi"]
        )
        # The hottest per-principal key (one agent's timeline or record).
        principal = math.inf
        for it in pth["tx"] + pth["put"]:
            if items[it]["scope"] == "principal":
                principal = min(
                    principal,
                    PARTITION_WRU / wru(self.size(it, inline), it in pth["tx"]),
                )
        for g in pth["gsi"]:
            if self.w["gsi"][g]["scope"] == "principal":
                principal = min(
                    principal, PARTITION_WRU / wru(self.gsi_size(g, inline))
                )
        return {
            "limits": limits,
            "key_cps": key_cps,
            "quota_cps": TABLE_QUOTA_WRU / base_wru,
            "base_wru": base_wru,
            "principal_cps": principal,
        }

    # -- LangGraph's DynamoDBSaver

    def langgraph_turn(self, n: int, delta: int) -> tuple[Usage, int, int]:
        """Turn `n` (1-based) of a thread: its usage, and the table and S3
        bytes it leaves at rest."""
        lg = self.w["langgraph"]
        u = Usage()
        table = s3 = 0
        for _ in range(lg["checkpoints_per_turn"]):
            state = lg["state_overhead_bytes"] + n * delta
            meta = item_size(self.expand(lg["metadata_attrs"], 0))
            u.wru += wru(meta)
            table += meta + ITEM_OVERHEAD
            if state > lg["s3_offload_bytes"]:
                u.s3_put += 1
                s3 += state
            else:
                payload = item_size(self.expand(lg["payload_attrs"], state))
                u.wru += wru(payload)
                table += payload + ITEM_OVERHEAD
            for _ in range(lg["writes_per_checkpoint"]):
                wmeta = item_size(self.expand(lg["write_attrs"], 0))
                wpay = item_size(self.expand(lg["payload_attrs"], delta))
                u.wru += wru(wmeta) + wru(wpay)
                table += wmeta + wpay + 2 * ITEM_OVERHEAD
        # get_tuple at the start of the turn: the previous checkpoint, its
        # payload, its pending writes and their payloads (eventually
        # consistent).
        if n > 1:
            prev = lg["state_overhead_bytes"] + (n - 1) * delta
            u.rru += rru(item_size(self.expand(lg["metadata_attrs"], 0)), False)
            if prev > lg["s3_offload_bytes"]:
                u.s3_get += 1
            else:
                u.rru += rru(item_size(self.expand(lg["payload_attrs"], prev)), False)
            u.rru += rru(item_size(self.expand(lg["write_attrs"], 0)), False)
            u.rru += (
                rru(item_size(self.expand(lg["payload_attrs"], delta)), False)
                * lg["writes_per_checkpoint"]
            )
        return u, table, s3

    def langgraph_fleet(self, turns_per_session: int) -> dict[str, float]:
        f = self.w["fleet"]
        p = self.prices
        turns = f["agents"] * f["turns_per_day"] * f["days"]
        sessions = turns / turns_per_session
        u = Usage()
        table = s3 = 0
        for n in range(1, turns_per_session + 1):
            tu, tt, ts = self.langgraph_turn(n, f["delta_bytes"])
            u = u + tu
            table += tt
            s3 += ts
        u = u * sessions
        # At rest: retention_days of writes (TTL deletes them for free).
        keep = f["retention_days"] / f["days"]
        table *= sessions * keep
        s3 *= sessions * keep
        parts = self.on_demand.parts(u)
        d = p["dynamodb"]
        return {
            "DynamoDB requests": parts["DynamoDB"],
            "S3 requests": parts["S3"],
            "DynamoDB storage": table / GB * d["storage_gb_month"],
            "PITR": table / GB * d["pitr_gb_month"],
            "S3 storage": s3 / GB * p["s3"]["storage_gb_month"],
            "API Gateway + Lambda": 0.0,
        }

    # -- the fleet

    def fleet(
        self,
        path: str,
        prices: Prices,
        turns_per_session: int | None = None,
        threshold: int | None = None,
    ) -> dict[str, float]:
        f = self.w["fleet"]
        tps = turns_per_session or f["turns_per_session"]
        if threshold is None:
            threshold = self.w["delta"]["current_inline_threshold"]
        ratio = self.w["delta"]["packed_ratio"]
        d = f["delta_bytes"]
        turns = f["agents"] * f["turns_per_day"] * f["days"]
        sessions = turns / tps
        ck = prices.parts(self.checkpoint(path, d, threshold, ratio))
        sm = prices.parts(self.summary(path, d, threshold, ratio, False))
        er = prices.parts(self.erase(path, d, threshold, ratio))
        mt = prices.parts(self.materialize("next", tps, d, threshold, ratio))
        store = self.storage_month(path, d, threshold, ratio)
        keep = turns * f["retention_days"] / f["days"]
        # Cached contexts: one per session start, kept 7 days (+1 day as a
        # noncurrent version) by the cache/ lifecycle rule.
        cache_gb = sessions * (8 / f["days"]) * tps * d / GB
        return {
            "checkpoints": sum(ck.values()) * turns,
            "summaries (extractive)": sum(sm.values()) * turns * f["summarized"],
            "retention erase": sum(er.values()) * turns,
            "materializes": sum(mt.values()) * sessions * f["materializes_per_session"],
            "storage": sum(store.values()) * keep
            + cache_gb * self.prices["s3"]["storage_gb_month"],
        }

    def fleet_storage_layer(
        self, path: str, prices: Prices, turns_per_session: int | None = None
    ) -> float:
        """The fleet's DynamoDB + S3 bill alone (what LangGraph's saver pays)."""
        f = self.w["fleet"]
        tps = turns_per_session or f["turns_per_session"]
        threshold = self.w["delta"]["current_inline_threshold"]
        ratio = self.w["delta"]["packed_ratio"]
        d = f["delta_bytes"]
        turns = f["agents"] * f["turns_per_day"] * f["days"]
        sessions = turns / tps
        total = 0.0
        for u, n in (
            (self.checkpoint(path, d, threshold, ratio), turns),
            (self.summary(path, d, threshold, ratio, False), turns * f["summarized"]),
            (self.erase(path, d, threshold, ratio), turns),
            (
                self.materialize("next", tps, d, threshold, ratio),
                sessions * f["materializes_per_session"],
            ),
        ):
            parts = prices.parts(u)
            total += (parts["DynamoDB"] + parts["S3"]) * n
        total += (
            sum(self.storage_month(path, d, threshold, ratio).values())
            * turns
            * f["retention_days"]
            / f["days"]
        )
        return total

    # -- the inline threshold

    def lifetime(
        self, path: str, delta: int, inline: bool, months: float, ratio: float
    ) -> float:
        """Dollars one commit of `delta` bytes costs over its life: written,
        summarized, kept `months`, erased; inline or in S3."""
        threshold = delta if inline else 0
        p = self.on_demand
        u = self.checkpoint(path, delta, threshold, ratio) + self.summary(
            path, delta, threshold, ratio, False
        )
        u = u + self.erase(path, delta, threshold, ratio)
        return (
            p.total(u)
            + sum(self.storage_month(path, delta, threshold, ratio).values()) * months
        )

    def crossover(self, path: str, months: float, ratio: float) -> int:
        """The largest delta (bytes, 256-byte steps) for which inline costs
        no more than S3 over a commit's life."""
        best = 0
        for delta in range(256, 64 * KB + 1, 256):
            if self.lifetime(path, delta, True, months, ratio) <= self.lifetime(
                path, delta, False, months, ratio
            ):
                best = delta
        return best

    def choose_threshold(self) -> int:
        """The model's inline threshold for DynamoDB: the crossover of
        today's write path at the fleet's retention (256-byte steps)."""
        months = self.w["fleet"]["retention_days"] / 30
        return self.crossover("today", months, self.w["delta"]["packed_ratio"])


# ---------------------------------------------------------------------------
# The document


def usd(x: float) -> str:
    if x >= 100:
        return f"${x:,.0f}"
    return f"${x:,.2f}"


# The headers of the cells `priced` gives by default.
PRICED_COLUMNS = ["API Gateway", "Lambda", "DynamoDB", "S3", "total"]


def priced(
    parts: dict[str, float],
    tot: float,
    keys: tuple[str, ...] = ("API Gateway", "Lambda", "DynamoDB", "S3"),
) -> list[str]:
    """The cells of a priced row: each part's dollars, then the total in bold."""
    return [usd(parts[k]) for k in keys] + [f"**{usd(tot)}**"]


def cps(x: float) -> str:
    return "unbounded" if math.isinf(x) else f"{x:,.0f}"


def kib(n: int) -> str:
    if n % KB == 0:
        return f"{n // KB} KiB"
    return f"{n:,} bytes"


def unit_price(x: float) -> str:
    return f"${x:g}"


def table(
    head: list[str], rows: list[list[str]], right: set[int] | None = None
) -> list[str]:
    right = right if right is not None else set(range(1, len(head)))
    out = ["| " + " | ".join(head) + " |"]
    out.append(
        "|" + "|".join("---:" if i in right else "---" for i in range(len(head))) + "|"
    )
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def look_transitions(asl: dict) -> tuple[int, int]:
    """State transitions of one look of the branch timer and of a branch
    stopped before its first look: a look enters every state from the
    start to the Choice, then one more (the re-arm or the end); a stopped
    branch only the first."""
    states, at, n = asl["States"], asl["StartAt"], 0
    while states[at]["Type"] != "Choice":
        n += 1
        at = states[at]["Next"]
    return n + 2, 1


def timer_looks(timeout: int, idle: int) -> int:
    """Looks a branch busy until its deadline takes: one at the deadline
    without the idle sweep (0); with it, one every `idle` seconds, the last
    at the deadline."""
    return 1 if idle == 0 else math.ceil(timeout / idle)


def timer_rows(p: dict, w: dict) -> list[tuple[str, int, int, float]]:
    """(case, looks, transitions, dollars per million branches) of the
    branch timer."""
    bt = w["branch_timer"]
    per_look, stopped = look_transitions(json.loads(TIMER_ASL.read_text()))
    per_transition = p["step_functions"]["standard_per_thousand_transitions"] / 1000
    expire = lam(bt["memory_mb"], bt["expire_ms"])
    look_lambda = (
        expire.lambda_requests * p["lambda"]["requests_per_million"] / MILLION
        + expire.lambda_gb_s * p["lambda"]["arm64_per_gb_second"]
    )
    t, idle = bt["timeout_secs"], bt["idle_secs"]
    rows = [("returned before its first look", 0, stopped)]
    for name, i in (
        (f"busy until its {t} s deadline, idle sweep off (0)", 0),
        (f"busy until its {t} s deadline, idle sweep at {idle} s (the default)", idle),
    ):
        looks = timer_looks(t, i)
        rows.append((name, looks, looks * per_look))
    return [
        (name, looks, n, MILLION * (n * per_transition + looks * look_lambda))
        for name, looks, n in rows
    ]


def memory_search_rows(p: dict, w: dict) -> list[tuple[int, int, float, float, float, float]]:
    """(memories, pages, read units, DynamoDB $, Lambda $, seconds) of one
    memory search on AWS, per tenant size."""
    ms = w["memory_search"]
    per_rru = p["dynamodb"]["on_demand_read_per_million"] / MILLION
    rows = []
    for n in ms["tenants_memories"]:
        total = n * ms["item_bytes"]
        pages = max(1, math.ceil(total / MB))
        # Eventually consistent: half a unit per 4 KB read, summed per page
        # and rounded up; then one strongly consistent unit per result.
        full, last = divmod(total, MB)
        units = full * math.ceil(MB / (4 * KB)) / 2 + math.ceil(last / (4 * KB)) / 2
        units += ms["results"]
        seconds = pages * ms["page_ms"] / 1000
        run = lam(ms["memory_mb"], pages * ms["page_ms"])
        lambda_usd = run.lambda_gb_s * p["lambda"]["arm64_per_gb_second"]
        rows.append((n, pages, units, units * per_rru, lambda_usd, seconds))
    return rows


def render(m: Model) -> str:
    p, w = m.prices, m.w
    dl = w["delta"]
    ref = dl["reference"]
    thr = dl["current_inline_threshold"]
    ratio = dl["packed_ratio"]
    od, pv = m.on_demand, m.provisioned
    L: list[str] = []
    add = L.append

    def per_m(
        u: Usage, prices: Prices = od, model: str = "claude-3-haiku"
    ) -> tuple[dict, float]:
        parts = {k: v * MILLION for k, v in prices.parts(u, model).items()}
        return parts, sum(parts.values())

    today_4k = m.checkpoint("today", ref, thr, ratio)
    today_4k_total = per_m(today_4k)[1]
    # The write paths are compared with the reference delta inline: in S3,
    # its PUT alone costs the whole target.
    inl = max(thr, ref)
    inline_4k = m.checkpoint("today", ref, inl, ratio)

    add("# Cost model")
    add("")
    add("Generated by `python3 tools/cost/model.py` from AWS list prices")
    add("([`tools/cost/prices.toml`](../tools/cost/prices.toml)) and the workload")
    add("([`tools/cost/workload.toml`](../tools/cost/workload.toml): the items and")
    add("requests of each operation, each naming the code or bench it comes from).")
    add("Do not edit by hand: change an input and run the command again;")
    add("`tests/run` fails while this file differs from what the inputs give")
    add("(`python3 tools/cost/model.py --check`).")
    add("")
    add(f"Prices: {p['note']}; region {p['region']}, US dollars, no free tier.")
    add("Lambda durations are estimates (no function has been timed on AWS);")
    add("request counts are the `aws_requests` bench's (docs/bench.md, \"AWS")
    add('mode"); item sizes are computed from example items with the attribute')
    add("names and value lengths the code writes. Data transfer out")
    add(
        f"(${p['transfer']['out_per_gb']:.2f}/GB to the internet, the same through API Gateway or S3)"
    )
    add("is in no total.")
    add("")

    # -- summary
    add("## Against the targets")
    add("")
    paths = w["paths"]
    meets = []
    for r, what in (
        (ratio, "incompressible"),
        (dl["transcript_packed_ratio"], "transcript text"),
    ):
        for name in paths:
            for label, prices in (("on-demand", od), ("provisioned at 60% use", pv)):
                t = per_m(m.checkpoint(name, ref, inl, r), prices)[1]
                if t <= TARGET_CHECKPOINT:
                    meets.append(f"{paths[name]['label']}, {label}, {what} ({usd(t)})")
    fleet_today = sum(m.fleet("today", od).values())
    lg_fleet = sum(m.langgraph_fleet(w["fleet"]["turns_per_session"]).values())
    ceil_today = m.ceiling("today", ref, inl, ratio)
    ceil_before = m.ceiling("before", ref, inl, ratio)
    before_4k = m.checkpoint("before", ref, inl, ratio)
    why_inline = (
        f"{inline_4k.wru:.0f} write units, because the delta is written twice"
        f" (two commit items, each in a transaction at 2 units per KB) and six"
        f" small items ride in the same transaction (before the `missing_summary`"
        f" index went keys-only, its ALL projection wrote the delta a third time:"
        f" {before_4k.wru:.0f} units, {usd(per_m(before_4k)[1])})"
    )
    if ref > thr:
        add(
            f"- **≤ $5 per million 4 KB checkpoints, all-in: missed.** Today a 4 KB"
            f" checkpoint costs **{usd(today_4k_total)} per million** (API Gateway,"
            f" Lambda, DynamoDB, S3): above the {kib(thr)} inline threshold the"
            f" delta goes to S3, whose PUT alone costs"
            f" {usd(per_m(Usage(s3_put=1))[1])} per million, beside"
            f" {today_4k.wru:.0f} write units of the items. Below $5 needs the delta"
            f" inline, and there today's write path costs {usd(per_m(inline_4k)[1])}:"
            f" {why_inline}. Below, every write path is priced with the delta inline."
        )
    else:
        add(
            f"- **≤ $5 per million 4 KB checkpoints, all-in: missed.** Today a 4 KB"
            f" checkpoint costs **{usd(today_4k_total)} per million** (API Gateway,"
            f" Lambda, DynamoDB, S3): {why_inline}."
        )
    if meets:
        add("  The rows that reach it:")
        for i, x in enumerate(meets):
            add(f"  - {x}{'.' if i == len(meets) - 1 else ';'}")
    else:
        add("  No write path reaches it.")
    nt = m.checkpoint("no_tx", ref, inl, ratio)
    add(
        f"  With incompressible 4 KB deltas, *no transaction* with provisioned"
        f" capacity costs {usd(per_m(nt, pv)[1])} ({nt.wru:.0f} write units: the commit,"
        f" its run slot, the ref and five keys-only index entries), on-demand"
        f" {usd(per_m(nt)[1])}."
    )
    ratio_fleet = lg_fleet / fleet_today
    add(
        f"- **Fleet bill ≥ 5× below LangGraph's DynamoDB checkpointer:"
        f" {'met' if ratio_fleet >= TARGET_FLEET_RATIO else 'missed'}.** 1,000 agents,"
        f" 100 turns a day, 30-day retention: ctx today {usd(fleet_today)} a month"
        f" all-in, DynamoDBSaver {usd(lg_fleet)} (storage layer only),"
        f" {ratio_fleet:.1f}× (sessions of {w['fleet']['turns_per_session']} turns). *No transaction*"
        f" with provisioned capacity would be"
        f" {lg_fleet / sum(m.fleet('no_tx', pv).values()):.1f}× below; the fleet section says why"
        f" today's is not."
    )
    met = ceil_today["key_cps"] >= TARGET_TENANT_CPS
    add(
        f"- **Per-tenant write ceiling ≥ 10,000 checkpoints/s: {'met by the keys' if met else 'missed'}.**"
        f" Today one tenant's hottest key allows **{cps(ceil_today['key_cps'])} checkpoints/s**"
        f" (4 KB; before the hot keys moved: {cps(ceil_before['key_cps'])}), whatever the number"
        f" of Lambdas. The table's default throughput quota binds first, at"
        f" {cps(ceil_today['quota_cps'])} a second: 10,000 needs it raised (section"
        f' "Per-tenant write ceiling", and ADR 0004).'
    )
    choice = m.choose_threshold()
    add(
        f"- **Inline-delta threshold on DynamoDB:** the model chooses"
        f" {kib(choice)}; the default of `{INLINE_SETTING}` is {kib(thr)}"
        + (
            " (set from this model; SQLite keeps its own, `CTX_INLINE_DELTA_BYTES`)."
            if choice == thr
            else " — they differ: change the default to the model's choice."
        )
    )
    add("")

    # -- checkpoints
    add("## Checkpoints")
    add("")
    add("Dollars per million checkpoints, today's write path, on-demand, each a")
    add("non-root commit with a session and a ref move (what the Claude Code hook")
    add(f"and the clients send); deltas of at most {kib(thr)} inline")
    add(f"(`{INLINE_SETTING}`), larger ones in S3; bytes stored as they come")
    add(f"(packing ratio {ratio:g}: the worst case, and the issue's arithmetic).")
    add("")
    rows = []
    for d in dl["sizes"]:
        u = m.checkpoint("today", d, thr, ratio)
        parts, tot = per_m(u)
        rows.append(
            [
                kib(d),
                f"{u.wru:.0f}",
                f"{u.rru:.0f}",
                *priced(parts, tot),
            ]
        )
    u = m.checkpoint("today", ref, thr, dl["transcript_packed_ratio"])
    parts, tot = per_m(u)
    rows.append(
        [
            f"{kib(ref)}, transcript text (zstd keeps {dl['transcript_packed_ratio']:g})",
            f"{u.wru:.0f}",
            f"{u.rru:.0f}",
            *priced(parts, tot),
        ]
    )
    L += table(
        [
            "delta",
            "write units",
            "read units",
            *PRICED_COLUMNS,
        ],
        rows,
    )
    add("")
    add(
        f"Where the write units of a {kib(ref)} checkpoint go (today; sizes by DynamoDB's"
    )
    add("rules from the example items of workload.toml):")
    add("")
    rows = [
        [it, how, f"{s:,}", str(n)]
        for it, how, s, n in m.checkpoint_items("today", m.stored(ref, thr, ratio))
    ]
    rows.append(
        [
            "total",
            "",
            "",
            f"**{sum(r[3] for r in m.checkpoint_items('today', m.stored(ref, thr, ratio)))}**",
        ]
    )
    L += table(["item", "written by", "bytes", "write units"], rows, {2, 3})
    add("")
    add("Reads: the parent's by-id item, the agent's record, the ref (three")
    add("strongly consistent GetItems). A root commit also Puts `TENANTS`")
    add("(2 more units).")
    add("")

    # -- write paths
    add("## Write paths and capacity modes")
    add("")
    add(f"A {kib(ref)} checkpoint, its delta inline, on each write path (`[paths]` in workload.toml says")
    add("what each writes), on-demand and with provisioned capacity used at 60%")
    add(f"(a write unit then costs ${pv.per_wru * MILLION:.3f} per million instead of")
    add(
        f"${od.per_wru * MILLION:.3f}; reads ${pv.per_rru * MILLION:.3f} instead of ${od.per_rru * MILLION:.3f})."
    )
    add("Only the first is built (\"before\" is what it replaced).")
    add("")
    rows = []
    tr = dl["transcript_packed_ratio"]
    for name, pth in paths.items():
        for label, prices in (("on-demand", od), ("provisioned 60%", pv)):
            u = m.checkpoint(name, ref, inl, ratio)
            parts, tot = per_m(u, prices)
            ok = "yes" if tot <= TARGET_CHECKPOINT else "no"
            ut = m.checkpoint(name, ref, inl, tr)
            tt = per_m(ut, prices)[1]
            okt = "yes" if tt <= TARGET_CHECKPOINT else "no"
            rows.append(
                [
                    pth["label"],
                    label,
                    f"{u.wru:.0f}",
                    usd(parts["API Gateway"] + parts["Lambda"]),
                    usd(parts["DynamoDB"]),
                    usd(parts["S3"]),
                    f"**{usd(tot)}**",
                    ok,
                    f"{ut.wru:.0f}",
                    usd(tt),
                    okt,
                ]
            )
    L += table(
        [
            "write path",
            "capacity",
            "write units",
            "API Gateway + Lambda",
            "DynamoDB",
            "S3",
            "total",
            "≤ $5",
            f"transcript text (zstd {tr:g}): write units",
            "total",
            "≤ $5",
        ],
        rows,
        {2, 3, 4, 5, 6, 8, 9},
    )
    add("")
    for name, pth in paths.items():
        reqs = ", ".join(f"{k}×{v}" for k, v in pth["requests"].items())
        add(f"- **{pth['label']}** ({reqs}): {pth['source']}.")
    add("")
    fl_od = per_m(m.checkpoint("floor", ref, thr, ratio))[1]
    fl_pv = per_m(m.checkpoint("floor", ref, thr, ratio), pv)[1]
    add(
        f"The issue's floors (about $9 with commit and ref in one transaction,"
        f" $5.6 without a transaction, $3.5 provisioned) counted the commit item"
        f" and the ref alone: the floor row reproduces that arithmetic"
        f" ({usd(fl_od)} on-demand, {usd(fl_pv)} provisioned). A design that keeps"
        f" resolve, erase, retention and the summary queue also writes their"
        f" index entries, one write unit each as keys-only index entries, which"
        f" is what the other rows count."
    )
    add("")
    add("What each keeps of the guarantees (an acknowledged commit is durable; a")
    add("ref never points at a missing commit):")
    add("")
    add("- *Commit + ref in one transaction* keeps both atomically; the indexes")
    add("  become keys-only GSIs, so the timeline (resolve), a session's commits")
    add("  and a commit's children are read eventually consistent (a GSI lags its")
    add("  table by a fraction of a second), and the chain walk reads run slots")
    add("  then BatchGetItems the commits (each item's read units rounded on its")
    add("  own, about twice today's Query for 4 KB deltas).")
    add("- *No transaction* writes the run slot, then the commit, then moves the")
    add("  ref, and answers only after the last: an acknowledged commit is")
    add("  durable and the ref moves only once its commit is stored. A crash in")
    add("  between leaves a claimed slot or an unreferenced commit, which the")
    add("  retry (same id) completes and garbage collection can remove; readers")
    add("  of a run must skip a slot whose commit is missing.")
    add("- Provisioned capacity needs autoscaling kept near its target; at 60%")
    add("  use the headroom absorbs bursts of about 1.6× before throttling.")
    add("")

    # -- reads
    add("## Materialize, resolve, download, summaries")
    add("")
    add(f"Dollars per million, today's items, {kib(ref)} deltas inline, on-demand.")
    add("Cold: no cached result on the path (`GetItem × (3 + probes)`, one Query")
    add("page per MB of the run, the result stored: `PutObject` and a")
    add("TransactWriteItems of the cache entry, its artifact-user item and a")
    add("ConditionCheck on the tip). Cached: the tip, the entry and a HEAD of the")
    add("result. Next turn: the parent's result cached, extended by one delta.")
    add("The ConditionCheck is priced as a transactional write of the tip's")
    add("by-id item (an estimate; with the delta inline it is most of the write")
    add("units below).")
    add("")
    rows = []
    for depth in w["materialize"]["depths"]:
        for kind, label in (
            ("cold", "cold"),
            ("warm", "cached"),
            ("next", "next turn"),
        ):
            u = m.materialize(kind, depth, ref, thr, ratio)
            parts, tot = per_m(u)
            rows.append(
                [
                    f"materialize, {label}",
                    f"{depth:,}",
                    f"{u.wru:.0f}",
                    f"{u.rru:,.0f}",
                    *priced(parts, tot),
                ]
            )
    u = m.resolve_op()
    parts, tot = per_m(u)
    rows.append(
        [
            "resolve",
            "-",
            "0",
            f"{u.rru:.0f}",
            *priced(parts, tot),
        ]
    )
    L += table(
        [
            "operation",
            "depth",
            "write units",
            "read units",
            *PRICED_COLUMNS,
        ],
        rows,
        {1, 2, 3, 4, 5, 6, 7, 8},
    )
    add("")
    add("Downloading the materialized bytes is a second request")
    add("(`GET /v1/artifacts/{art}`), metered by API Gateway in 512 KB units up")
    add("to the 6 MB a Lambda may answer, by presigned S3 URL above (issue 24,")
    add("item 2). Data transfer out is extra:")
    add("")
    rows = []
    for depth in w["materialize"]["depths"]:
        size = (depth + 1) * ref
        u = m.download(size)
        parts, tot = per_m(u)
        out = size / GB * p["transfer"]["out_per_gb"] * MILLION
        rows.append(
            [f"{depth:,}", f"{size / MB:.2f} MB", f"{u.api:.0f}", usd(tot), usd(out)]
        )
    L += table(
        [
            "depth",
            "context",
            "API Gateway units",
            "per million",
            "+ transfer out to the internet",
        ],
        rows,
    )
    add("")
    add("Summaries, per million commits summarized by the batch (default every 15")
    add("minutes; no API Gateway). Each is a claim and a summary, two")
    add("TransactWriteItems updating both commit items, which carry the delta; the")
    add("summary removes the commit's `missing_summary` entry (keys only: the claim")
    add("leaves it, and the batch reads the by-id items the index names):")
    add("")
    rows = []
    for d in dl["sizes"]:
        for label, bedrock, model in (
            ("extractive", False, "claude-3-haiku"),
            ("Bedrock, Claude 3 Haiku", True, "claude-3-haiku"),
            ("Bedrock, Claude Haiku 4.5", True, "claude-haiku-4-5"),
        ):
            u = m.summary("today", d, thr, ratio, bedrock)
            parts, tot = per_m(u, od, model)
            rows.append(
                [
                    kib(d),
                    label,
                    f"{u.wru:.0f}",
                    f"{u.tokens_in:,.0f} / {u.tokens_out:,.0f}",
                    *priced(parts, tot, ("Lambda", "DynamoDB", "S3", "Bedrock")),
                ]
            )
    L += table(
        [
            "delta",
            "summarizer",
            "write units",
            "tokens in / out",
            "Lambda",
            "DynamoDB",
            "S3",
            "Bedrock",
            "total",
        ],
        rows,
        {2, 3, 4, 5, 6, 7, 8},
    )
    add("")
    u = m.erase("today", ref, thr, ratio)
    parts, tot = per_m(u)
    add("Erasing a commit (retention, or an erase; the bench's requests per")
    add(f"commit, each item deleted at its size in a transaction): {u.wru:.0f} write")
    add(
        f"units and {u.rru:.1f} read units for a {kib(ref)} delta inline, **{usd(tot)} per million**."
    )
    add("")

    # -- storage
    add("## Storage")
    add("")
    d = p["dynamodb"]
    add(
        f"List prices per GB-month: DynamoDB {unit_price(d['storage_gb_month'])} (+ {unit_price(d['pitr_gb_month'])}"
    )
    add("point-in-time recovery, which template.yaml enables), S3 Standard")
    add(
        f"{unit_price(p['s3']['storage_gb_month'])}. What one summarized commit keeps (today's items; each"
    )
    add(
        f"item counts {ITEM_OVERHEAD} bytes of overhead; refs and a session's last write are"
    )
    add("per session, not counted):")
    add("")
    rows = []
    for dsz in dl["sizes"]:
        table_b, index_b, s3_b = m.at_rest("today", dsz, thr, ratio)
        st = m.storage_month("today", dsz, thr, ratio)
        per_gb = sum(st.values()) / (dsz / GB)
        rows.append(
            [
                kib(dsz),
                "inline" if m.stored(dsz, thr, ratio) else "S3",
                f"{table_b + index_b:,}",
                f"{s3_b:,}",
                usd(sum(st.values()) * MILLION),
                usd(per_gb),
            ]
        )
    L += table(
        [
            "delta",
            "stored",
            "table bytes",
            "S3 bytes",
            "per million commits a month",
            "per GB of deltas a month",
        ],
        rows,
        {2, 3, 4, 5},
    )
    add("")

    # -- inline threshold
    add("## The inline threshold on DynamoDB")
    add("")
    add("A delta inline costs write units on both commit items and the index")
    add("entry, the summary queue's updates of both items, their deletes, and")
    add("DynamoDB storage twice; in S3 it costs a PUT, a GET for the summarizer, a")
    add("LIST when erased, and S3 storage. Lifetime dollars per million commits")
    add("(written, summarized, kept, erased; on-demand; today's write path; cold")
    add("materializes, rare behind the cache, left out):")
    add("")
    rows = []
    for dsz in (512, 1024, 2048, 4096, 8192, 16384):
        rows.append(
            [
                kib(dsz) if dsz >= KB else f"{dsz} B",
                usd(m.lifetime("today", dsz, True, 1, ratio) * MILLION),
                usd(m.lifetime("today", dsz, False, 1, ratio) * MILLION),
                usd(m.lifetime("today", dsz, True, 12, ratio) * MILLION),
                usd(m.lifetime("today", dsz, False, 12, ratio) * MILLION),
            ]
        )
    L += table(
        [
            "delta",
            "inline, kept 1 month",
            "S3, kept 1 month",
            "inline, kept 12 months",
            "S3, kept 12 months",
        ],
        rows,
    )
    add("")
    rows = []
    for name in ("today", "commit_ref_tx", "no_tx"):
        rows.append(
            [
                paths[name]["label"],
                kib(m.crossover(name, 1, ratio)),
                kib(m.crossover(name, 12, ratio)),
                kib(m.crossover(name, 1, dl["transcript_packed_ratio"])),
            ]
        )
    add("The crossover (the largest delta for which inline costs no more):")
    add("")
    L += table(
        [
            "write path",
            "kept 1 month",
            "kept 12 months",
            "kept 1 month, transcript text",
        ],
        rows,
    )
    add("")
    add(
        f"**The model's choice: {kib(m.choose_threshold())}** for DynamoDB (today's write path,"
        f" 30-day retention, 256-byte steps); the default of `{INLINE_SETTING}`"
        f" is **{kib(thr)}** (docs/config.md; SQLite's `CTX_INLINE_DELTA_BYTES` is"
        f" 64 KiB, where an inline delta saves a file and costs nothing per unit)."
        f" Inline deltas still save latency: a cold materialize of inline deltas"
        f" reads its run in one Query page per MB instead of one GET per delta."
    )
    add("")

    # -- fleet
    f = w["fleet"]
    turns = f["agents"] * f["turns_per_day"] * f["days"]
    add("## A fleet: 1,000 agents, 100 turns a day, 30-day retention")
    add("")
    add(
        f"{f['agents']:,} agents × {f['turns_per_day']} turns a day × {f['days']} days ="
        f" {turns:,} checkpoints a month of {kib(f['delta_bytes'])} deltas, each summarized"
        f" (the default extractive summarizer) and erased by retention after"
        f" {f['retention_days']} days; sessions of {f['turns_per_session']} turns (estimate),"
        f" each starting with one materialize of the context it resumes (next-turn"
        f" kind); at rest: {f['retention_days']} days of commits."
    )
    add("")
    rows = []
    chosen = m.choose_threshold()
    fl = m.fleet("today", od, threshold=chosen)
    tot = sum(fl.values())
    rows.append(
        [
            f"ctx today, deltas over {kib(chosen)} in S3 (the model's threshold), on-demand"
        ]
        + [usd(v) for v in fl.values()]
        + [f"**{usd(tot)}**", f"{lg_fleet / tot:.1f}×"]
    )
    for name, prices, label in (
        ("today", od, "ctx today, on-demand"),
        ("commit_ref_tx", od, "ctx, commit + ref in one transaction, on-demand"),
        ("no_tx", od, "ctx, no transaction, on-demand"),
        ("no_tx", pv, "ctx, no transaction, provisioned 60%"),
    ):
        fl = m.fleet(name, prices)
        tot = sum(fl.values())
        rows.append(
            [label]
            + [usd(v) for v in fl.values()]
            + [f"**{usd(tot)}**", f"{lg_fleet / tot:.1f}×"]
        )
    lgp = m.langgraph_fleet(f["turns_per_session"])
    rows.append(
        [
            "LangGraph DynamoDBSaver (storage layer only)",
            usd(lgp["DynamoDB requests"] + lgp["S3 requests"]),
            "-",
            "-",
            "-",
            usd(lgp["DynamoDB storage"] + lgp["PITR"] + lgp["S3 storage"]),
            f"**{usd(lg_fleet)}**",
            "1.0×",
        ]
    )
    L += table(
        [
            "",
            "checkpoints",
            "summaries",
            "retention erase",
            "materializes",
            "storage",
            "a month",
            "LangGraph ÷ this",
        ],
        rows,
    )
    add("")
    add("LangGraph's DynamoDBSaver (`langgraph-checkpoint-aws`; read in")
    add(
        "langchain-ai/langchain-aws, `libs/langgraph-checkpoint-aws/langgraph_checkpoint_aws/checkpoint/dynamodb/`"
    )
    add("`saver.py`, `unified_repository.py`, `storage_strategy.py` and its README)")
    add("stores each checkpoint whole: a metadata item and a payload item holding")
    add("every channel's value, so the full message list, rewritten at every")
    add("checkpoint (above 350 KB the payload goes to S3); each pending write is")
    add("two more items; reads are eventually consistent; TTL deletes for free.")
    add("It runs in the agent's process: no API Gateway or Lambda, so its column")
    add("is DynamoDB and S3 only, while ctx's rows are all-in. It is priced with")
    add(
        f"one checkpoint and one write per turn ({w['langgraph']['checkpoints_per_turn']}): a LangGraph ReAct turn"
    )
    add("with a tool call writes one checkpoint per super-step (about 3), which")
    add("would multiply its writes.")
    add("")
    add("The ratio depends on session length, since a whole-state checkpoint")
    add("grows with the session while a delta does not:")
    add("")
    rows = []
    for tps in (10, 50, 100, 200):
        lgt = sum(m.langgraph_fleet(tps).values())
        ct = sum(m.fleet("today", od, tps).values())
        cs = m.fleet_storage_layer("today", od, tps)
        nt = sum(m.fleet("no_tx", pv, tps).values())
        rows.append(
            [
                str(tps),
                usd(lgt),
                usd(ct),
                f"{lgt / ct:.1f}×",
                f"{lgt / cs:.1f}×",
                usd(nt),
                f"{lgt / nt:.1f}×",
            ]
        )
    L += table(
        [
            "turns per session",
            "LangGraph",
            "ctx today, all-in",
            "ratio",
            "ratio, storage layer only",
            "ctx no transaction, provisioned",
            "ratio",
        ],
        rows,
    )
    add("")
    fl = m.fleet("today", od)
    big = max(fl, key=fl.get)
    reach = [
        label
        for name, prices, label in (
            ("commit_ref_tx", od, "commit + ref in one transaction, on-demand"),
            ("commit_ref_tx", pv, "commit + ref in one transaction, provisioned"),
            ("no_tx", od, "no transaction, on-demand"),
            ("no_tx", pv, "no transaction, provisioned"),
        )
        if lg_fleet / sum(m.fleet(name, prices).values()) >= TARGET_FLEET_RATIO
    ]
    add(
        f"Why ctx today is only {ratio_fleet:.1f}× below at {f['turns_per_session']} turns a session: its"
        f" per-turn cost is not only the checkpoint. Summarizing a commit"
        f" ({usd(per_m(m.summary('today', ref, thr, ratio, False))[1])} per million, extractive) and erasing it"
        f" ({usd(per_m(m.erase('today', ref, thr, ratio))[1])}) each rewrite or delete both delta-carrying"
        f" commit items in transactions (the largest line: {big}), while"
        f" LangGraph's TTL deletes cost nothing and it writes no summaries."
        f" LangGraph's whole-state rewrites grow with the session (above 350 KB"
        f" its payload moves to S3, which is why its bill falls again at 200"
        f" turns). At {f['turns_per_session']} turns the 5× target is reached by: "
        + ("; ".join(reach) if reach else "no row")
        + "."
    )
    add("")

    # -- ceilings
    add("## Per-tenant write ceiling")
    add("")
    add(
        f"A partition takes about {PARTITION_WRU:,} write units and {PARTITION_RRU:,} read units a second. A"
    )
    add("key whose partition is per tenant caps the tenant's checkpoints a second")
    add("at (partitions × 1,000) ÷ (units per checkpoint on it), whatever the number")
    add("of Lambdas. DynamoDB may split a hot partition by sort-key range (split")
    add("for heat) after sustained load, but not a key whose sort key only grows")
    add("(every write lands in the last range: the `missing_summary` index's `ts`)")
    add("and not on a schedule anyone can count on, so the model takes one")
    add("partition per key. Past the keys, an on-demand table's default quota of")
    add(
        f"{TABLE_QUOTA_WRU:,} write units a second (raised by a Service Quotas request) caps"
    )
    add(f"the table. {kib(ref)} deltas inline (the heaviest case for the index partitions):")
    add("")
    rows = []
    for name, pth in paths.items():
        c = m.ceiling(name, ref, inl, ratio)
        hot = (
            "; ".join(
                f"`{k}`{' ×' + str(s) if s > 1 else ''}: {wv:.0f} WU{f' + {rv:.0f} RU' if rv else ''} → {cps(cv)}/s"
                for k, s, wv, rv, cv in c["limits"]
            )
            or "none per tenant"
        )
        rows.append(
            [
                pth["label"],
                hot,
                f"**{cps(c['key_cps'])}**",
                cps(c["quota_cps"]),
                cps(c["principal_cps"]),
            ]
        )
    L += table(
        [
            "write path",
            "per-tenant keys (units per checkpoint → ceiling)",
            "tenant ceiling, checkpoints/s",
            "table quota bound",
            "one principal",
        ],
        rows,
        {2, 3, 4},
    )
    add("")
    add("By delta size, before and after the hot keys moved:")
    add("")
    rows = []
    for dsz in dl["sizes"]:
        rows.append(
            [
                kib(dsz),
                cps(m.ceiling("before", dsz, max(thr, dsz), ratio)["key_cps"]),
                cps(m.ceiling("today", dsz, max(thr, dsz), ratio)["key_cps"]),
                cps(m.ceiling("today", dsz, max(thr, dsz), ratio)["quota_cps"]),
                cps(m.ceiling("no_tx_sharded", dsz, max(thr, dsz), ratio)["key_cps"]),
                cps(m.ceiling("no_tx_sharded", dsz, max(thr, dsz), ratio)["quota_cps"]),
            ]
        )
    L += table(
        [
            "delta",
            "before",
            "today (keys moved)",
            "its table quota bound",
            "no transaction, keys moved",
            "its table quota bound",
        ],
        rows,
    )
    add("")
    add("Before, the ceiling was set by the `missing_summary` index (keyed by")
    add("tenant, ALL projection: every unsummarized commit's whole item, delta")
    add("included, went to one index partition), then by `T#<tenant>#REF` and")
    add("`T#<tenant>#SL` (2 units each per checkpoint, in the transaction). Today")
    add("(built): the `missing_summary` key is sharded (`nosum = <tenant>#<shard>`,")
    add("16 shards from the commit id's hash, the summarizer querying each) and")
    add("projected KEYS_ONLY (the summarizer then batch-gets the commits); each ref")
    add("is on its own partition (`T#<tenant>#REF#<name>`) and a session's last")
    add("write on the session's (`T#<tenant>#S#<session>`), both listed through")
    add("the keys-only `listing` index, whose entry a ref move or a session's next")
    add("write does not rewrite (its keys do not change; an entry is written when a")
    add("ref or session first appears). No per-tenant key is left but the sharded")
    add("index, and the table quota binds: 10,000 checkpoints a second needs the")
    add("quota raised (to about")
    c = m.ceiling("today", ref, inl, ratio)
    add(
        f"{c['base_wru'] * TARGET_TENANT_CPS:,.0f} write units a second with today's transaction,"
    )
    c2 = m.ceiling("no_tx_sharded", ref, inl, ratio)
    add(
        f"{c2['base_wru'] * TARGET_TENANT_CPS:,.0f} without it). The summary removes each commit's"
    )
    add("entry from the same shard (one more unit there, at the summarizer's pace,")
    add(
        f"which the ceiling above leaves out): with the summarizer keeping pace the shards"
    )
    add(
        f"allow {cps(c['key_cps'] / 2)} a second. One principal's timeline is one"
    )
    add("partition whose sort key only grows: a tenant that checkpoints every")
    add("session under one principal has that column's ceiling.")
    add("")

    add("## Branch timers")
    add("")
    add("Each branch has one Standard Step Functions execution")
    add("(`infra/statemachines/branch-timer.asl.json`) that looks at the branch")
    add("when it may be due: at its deadline and, with the idle sweep")
    add(f"(`{IDLE_SETTING}`, template parameter `SessionIdleSecs`), every time")
    add("its session may have been idle that long. A look is one `branch-expire`")
    bt = w["branch_timer"]
    add(
        f"invocation ({bt['memory_mb']} MB, {bt['expire_ms']} ms: estimate) and its state transitions, at"
    )
    add(
        f"{unit_price(p['step_functions']['standard_per_thousand_transitions'])} per 1,000."
        " Per million branches, beside the branch's own create and"
    )
    add("return requests (docs/bench.md, \"Branch create and return\"):")
    add("")
    L.extend(
        table(
            ["branch", "looks", "state transitions", "per million branches"],
            [[c, str(looks), str(n), usd(d)] for c, looks, n, d in timer_rows(p, w)],
        )
    )
    add("")
    add("A branch returned before its first look (at its deadline without the")
    add(f"sweep, {bt['idle_secs']} s after its last activity with it) costs one transition; the")
    add(f"sweep adds looks only to branches that live past {bt['idle_secs']} s.")
    add("")

    add("## Memory search")
    add("")
    ms = w["memory_search"]
    add("A search on AWS ranks every memory of the tenant: one Query over its")
    add("memory partition (eventually consistent, 1 MB pages) streamed past the")
    add("BM25 ranker, which keeps only statistics and each match's key, then the")
    add(f"best {ms['results']} read again by GetItem. With {ms['item_bytes']:,}-byte memory items (estimate)")
    add(f"and {ms['page_ms']} ms of the invocation per page (estimate), dollars per million")
    add("searches, and the time one search adds:")
    add("")
    L.extend(
        table(
            ["memories", "pages", "read units", "DynamoDB", "Lambda", "total", "time"],
            [
                [
                    f"{n:,}",
                    str(pages),
                    f"{units:,.0f}",
                    usd(MILLION * ddb),
                    usd(MILLION * lam_usd),
                    f"**{usd(MILLION * (ddb + lam_usd))}**",
                    f"{secs:.2f} s",
                ]
                for n, pages, units, ddb, lam_usd, secs in memory_search_rows(p, w)
            ],
        )
    )
    add("")
    add("The cost and the time grow with the tenant's memories: at the functions'")
    reach = 30_000 // ms["page_ms"] * MB // ms["item_bytes"]
    add(f"30 s timeout a search reads about {round(reach, -4):,} memories at most. Past that it needs")
    add("an index (term items, or OpenSearch), which is not built. The embedded")
    add("store searches SQLite's FTS5 index instead and reads only the matches.")
    add("")

    add("## Not counted")
    add("")
    add("The retention pass's listing of idle sessions and root commits' `TENANTS`")
    add("item (per session, not per commit), CloudWatch logs and metrics, KMS")
    add("requests (the default table and bucket keys are AWS-owned), the free")
    add("tier, S3 versions kept by the bucket's lifecycle rule after a delete (30")
    add("days noncurrent), data transfer out, and the agent's own model calls.")
    add("")
    return "\n".join(L)


ADR = ROOT / "docs" / "adr" / "0004-dynamodb-table-design.md"
ADR_BEGIN = "<!-- generated by tools/cost/model.py: the ceiling table -->"
ADR_END = "<!-- end of the generated table -->"


def ceiling_table(m: Model) -> str:
    """The per-tenant ceiling table ADR 0004 carries (4 KB deltas, inline:
    the case that loads the index partitions most)."""
    dl = m.w["delta"]
    ref, ratio = dl["reference"], dl["packed_ratio"]
    inl = max(dl["current_inline_threshold"], ref)
    rows = []
    for name, pth in m.w["paths"].items():
        if name == "floor":
            continue
        c = m.ceiling(name, ref, inl, ratio)
        keys = (
            ", ".join(f"`{k}`" for k, *_ in c["limits"] if _[3] == c["key_cps"]) or "-"
        )
        rows.append(
            [
                (
                    "built: "
                    if pth["built"]
                    else "" if pth.get("replaced") else "not built: "
                )
                + pth["label"].replace(" (not built)", ""),
                keys,
                f"**{cps(c['key_cps'])}**",
                cps(c["quota_cps"]),
            ]
        )
    head = [
        "write path",
        "hottest per-tenant key",
        "checkpoints/s, one tenant",
        "bound of the default table quota (40,000 WU/s)",
    ]
    return "\n".join(table(head, rows, {2, 3}))


def adr_with(text: str, block: str) -> str:
    """`text` with the generated block between the markers replaced."""
    start = text.index(ADR_BEGIN) + len(ADR_BEGIN)
    end = text.index(ADR_END)
    return text[:start] + "\n" + block + "\n" + text[end:]


def build() -> tuple[str, str]:
    m = Model(load(HERE / "prices.toml"), load_workload(HERE / "workload.toml"))
    return render(m), ceiling_table(m)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--check",
        action="store_true",
        help="fail if docs/cost.md differs from what the inputs give",
    )
    args = ap.parse_args(argv)
    text, ceilings = build()
    adr = ADR.read_text()
    if ADR_BEGIN not in adr or ADR_END not in adr:
        print(
            f"{ADR.relative_to(ROOT)} lost the markers of its generated ceiling table",
            file=sys.stderr,
        )
        return 1
    if args.check:
        stale = []
        if not DOC.exists() or DOC.read_text() != text:
            stale.append("docs/cost.md")
        if adr_with(adr, ceilings) != adr:
            stale.append(str(ADR.relative_to(ROOT)))
        if stale:
            print(
                " and ".join(stale)
                + " differ from what tools/cost/prices.toml and workload.toml give:"
                " run `python3 tools/cost/model.py` and commit the result",
                file=sys.stderr,
            )
            return 1
        return 0
    DOC.write_text(text)
    ADR.write_text(adr_with(adr, ceilings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
