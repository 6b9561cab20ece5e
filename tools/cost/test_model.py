"""Checks of the cost model's arithmetic (run by tests/run:
`python3 -m unittest discover -s tools/cost`)."""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import model
from model import Blob, Model, Usage, api_units, item_size, load, number_size, packed, rru, wru

HERE = Path(__file__).resolve().parent


def loaded() -> Model:
    return Model(load(HERE / "prices.toml"), model.load_workload(HERE / "workload.toml"))


class Units(unittest.TestCase):
    def test_write_units_round_up_per_kb_and_double_in_a_transaction(self):
        self.assertEqual(wru(1), 1)
        self.assertEqual(wru(1024), 1)
        self.assertEqual(wru(1025), 2)
        self.assertEqual(wru(4 * 1024 + 700), 5)
        self.assertEqual(wru(1025, transactional=True), 4)

    def test_read_units_round_up_per_4_kb_and_halve_when_eventually_consistent(self):
        self.assertEqual(rru(1), 1)
        self.assertEqual(rru(4096), 1)
        self.assertEqual(rru(4097), 2)
        self.assertEqual(rru(4097, consistent=False), 1.0)

    def test_api_gateway_meters_http_api_requests_in_512_kb_units(self):
        unit = 512 * 1024
        self.assertEqual(api_units(10, unit), 1)
        self.assertEqual(api_units(unit, unit), 1)
        self.assertEqual(api_units(unit + 1, unit), 2)
        self.assertEqual(api_units(4 * 1024 * 1024, unit), 8)

    def test_item_size_counts_names_and_values_by_dynamodb_rules(self):
        # "pk"(2) + "ab"(2) + "n"(1) + 123 (3 digits: 2 + 1) + "b"(1) + 10 bytes.
        self.assertEqual(item_size({"pk": "ab", "n": 123, "b": Blob(10)}), 2 + 2 + 1 + 3 + 1 + 10)
        # A map: 3 bytes + per element its name, value and 1 byte.
        self.assertEqual(item_size({"m": {"x": "yz"}}), 1 + 3 + (1 + 2 + 1))
        self.assertEqual(item_size({"z": None}), 1 + 1)
        self.assertEqual(number_size(1795702020123456), 9)
        self.assertEqual(number_size(1000), 2)

    def test_packing_is_used_only_when_it_saves_an_eighth(self):
        self.assertEqual(packed(4096, 0.71), 2909)
        self.assertEqual(packed(4096, 0.9), 4096)


class Checkpoint(unittest.TestCase):
    def test_a_4_kb_checkpoint_before_the_keys_moved_by_hand(self):
        m = loaded()
        by_id = m.size("commit_by_id_before", 4096)
        in_run = m.size("commit_in_run", 4096)
        # Both commit items are a little under 5 KB with a 4 KB delta.
        self.assertTrue(4 * 1024 < by_id <= 5 * 1024, by_id)
        self.assertTrue(4 * 1024 < in_run <= 5 * 1024, in_run)
        u = m.checkpoint("before", 4096, 16384, 1.0)
        # Two commit items at 2 × 5, six small items at 2 × 1, the index's
        # ALL copy of the by-id item at 5: the 37.
        self.assertEqual(u.wru, 2 * 2 * 5 + 6 * 2 + 5)
        # The parent (5 KB: 2 units), the agent, the ref.
        self.assertEqual(u.rru, 2 + 1 + 1)
        self.assertEqual((u.s3_put, u.api, u.lambda_requests), (0, 1, 1))
        # 256 MB for 40 ms.
        self.assertAlmostEqual(u.lambda_gb_s, 0.25 * 0.040)
        dollars = 37 * 0.625 + 4 * 0.125 + 1.00 + 0.20 + 0.25 * 0.040 * 0.0000133334 * 1e6
        self.assertAlmostEqual(m.on_demand.total(u) * 1e6, dollars, places=6)

    def test_a_4_kb_checkpoint_today_by_hand(self):
        m = loaded()
        u = m.checkpoint("today", 4096, 16384, 1.0)
        # Two commit items at 2 × 5, six small items at 2 × 1 (the ref and
        # the session's last write on their own partitions, still under
        # 1 KB), the keys-only index entry at 1: the delta is written twice.
        self.assertEqual(u.wru, 2 * 2 * 5 + 6 * 2 + 1)
        self.assertEqual(m.gsi_size("missing_summary_sharded", 4096), m.gsi_size("missing_summary_sharded", 0))
        self.assertLess(m.size("ref_own", 0), 1024)
        self.assertLess(m.size("session_last_own", 0), 1024)
        self.assertEqual(u.rru, 2 + 1 + 1)

    def test_exactly_one_path_is_built_and_it_is_today(self):
        m = loaded()
        built = [name for name, p in m.w["paths"].items() if p["built"]]
        self.assertEqual(built, ["today"])

    def test_a_delta_above_the_threshold_goes_to_s3(self):
        m = loaded()
        u = m.checkpoint("today", 65536, 16384, 1.0)
        self.assertEqual(u.s3_put, 1)
        # No item carries the delta: every item fits 1 KB.
        self.assertEqual(u.wru, 8 * 2 + 1)

    def test_provisioned_units_cost_the_hour_price_over_use(self):
        m = loaded()
        self.assertAlmostEqual(m.provisioned.per_wru, 0.00065 / 3600 / 0.6)
        self.assertAlmostEqual(m.provisioned.total(Usage(wru=1e6)), 0.00065 / 3600 / 0.6 * 1e6)


class Ceiling(unittest.TestCase):
    def test_before_one_tenant_was_capped_by_the_missing_summary_partition(self):
        m = loaded()
        c = m.ceiling("before", 4096, 16384, 1.0)
        # The ALL projection writes 5 units of the tenant's one index
        # partition per checkpoint: 1,000 / 5.
        self.assertEqual(c["key_cps"], 200)
        keys = {k: cps for k, _, _, _, cps in c["limits"]}
        self.assertEqual(keys["T#<tenant>#REF"], 500)
        self.assertEqual(keys["T#<tenant>#SL"], 500)

    def test_today_the_sharded_keys_lift_the_tenant_past_10000(self):
        m = loaded()
        c = m.ceiling("today", 4096, 16384, 1.0)
        self.assertGreaterEqual(c["key_cps"], 10_000)
        # The one per-tenant key left is the 16-way index: 16 × 1,000 / 1.
        self.assertEqual([(k, s) for k, s, *_ in c["limits"]], [("missing_summary: nosum = <tenant>#<shard of 16>", 16)])
        self.assertEqual(c["key_cps"], 16_000)


class Threshold(unittest.TestCase):
    def test_dynamodbs_default_inline_threshold_is_the_models_choice(self):
        m = loaded()
        self.assertEqual(
            model.configured_default(model.INLINE_SETTING),
            m.choose_threshold(),
            f"set {model.INLINE_SETTING}'s default (shared/src/commit.rs, config) to the"
            " model's choice",
        )


class Document(unittest.TestCase):
    def test_the_document_is_what_the_inputs_give(self):
        text, ceilings = model.build()
        self.assertEqual(model.DOC.read_text(), text, "run python3 tools/cost/model.py")
        adr = model.ADR.read_text()
        self.assertEqual(model.adr_with(adr, ceilings), adr, "run python3 tools/cost/model.py")
        self.assertTrue(text.startswith("# Cost model\n\nGenerated by `python3 tools/cost/model.py`"))


if __name__ == "__main__":
    unittest.main()


class BranchTimers(unittest.TestCase):
    def test_a_look_is_wait_task_choice_and_one_more_state(self):
        import json

        asl = json.loads(model.TIMER_ASL.read_text())
        self.assertEqual(model.look_transitions(asl), (4, 1))

    def test_looks_come_every_idle_limit_until_the_deadline(self):
        self.assertEqual(model.timer_looks(300, 0), 1)
        self.assertEqual(model.timer_looks(300, 120), 3)
        self.assertEqual(model.timer_looks(300, 300), 1)
        self.assertEqual(model.timer_looks(300, 600), 1)

    def test_the_rows_price_transitions_and_invocations(self):
        m = loaded()
        rows = model.timer_rows(m.prices, m.w)
        self.assertEqual([(looks, n) for _, looks, n, _ in rows], [(0, 1), (1, 4), (3, 12)])
        per_transition = m.prices["step_functions"]["standard_per_thousand_transitions"] / 1000
        self.assertAlmostEqual(rows[0][3], 1_000_000 * per_transition)
        # One look: 4 transitions and one 256 MB, 50 ms invocation.
        lam = 0.20 / 1_000_000 + 0.25 * 0.05 * m.prices["lambda"]["arm64_per_gb_second"]
        self.assertAlmostEqual(rows[1][3], 1_000_000 * (4 * per_transition + lam))

