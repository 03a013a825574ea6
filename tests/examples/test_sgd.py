#!/usr/bin/env python3
"""examples/sgd/train.py against the trainer contract, run directly with the
SLICE_* environment the supervisor would give it, in temporary directories:

* an uninterrupted run ends with its final parameters printed and saved;
* runs stopped by SIGTERM at several points, each resumed from the step it
  saved (copied into a restore directory, as the supervisor restores it),
  end with bit-for-bit the same parameters, and the same last checkpoint;
* a run resumed from any of the periodic checkpoints (after SIGKILL, or
  from an uninterrupted run's) ends the same;
* restores that cannot reproduce the run are refused;
* two processes sharing the data through SGD_SYNC_DIR save the same step
  when stopped and resume to the two-process run's parameters.
"""

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.environ.get("SLICECTL_SRCDIR") or os.path.dirname(
    os.path.dirname(HERE))
TRAIN = os.path.join(SRCDIR, "examples", "sgd", "train.py")
STEPS = 3000
EVERY = 500
TIMEOUT = 120


class Trainer:
    """One train.py process; its output lines are collected by a thread."""

    def __init__(self, ckpt_dir, restore_dir=None, restore_step=None,
                 generation=1, process=0, processes=1, extra=None):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLICE_", "SGD_"))}
        env.update({
            "SLICE_RUN": "sgd-test",
            "SLICE_ID": "0",
            "SLICE_NUM_SLICES": "1",
            "SLICE_WORKER_ID": str(process),
            "SLICE_WORKERS_PER_SLICE": str(processes),
            "SLICE_PROCESS_ID": str(process),
            "SLICE_NUM_PROCESSES": str(processes),
            "SLICE_GENERATION": str(generation),
            "SLICE_CHECKPOINT_DIR": ckpt_dir,
            "SGD_STEPS": str(STEPS),
            "SGD_CKPT_EVERY": str(EVERY),
            "SGD_PRINT_EVERY": "10",
        })
        if restore_dir is not None:
            env["SLICE_RESTORE_DIR"] = restore_dir
            env["SLICE_RESTORE_STEP"] = str(restore_step)
        env.update(extra or {})
        os.makedirs(ckpt_dir, exist_ok=True)
        self.ckpt_dir = ckpt_dir
        self.lines = []
        self._q = queue.Queue()
        self.proc = subprocess.Popen(
            [sys.executable, TRAIN], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self._q.put(line.rstrip("\n"))
        self.proc.stdout.close()
        self._q.put(None)

    def wait_line(self, pattern, timeout=TIMEOUT):
        """Waits for an output line matching pattern; returns the match."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no line matching %r in %d s:\n%s"
                                     % (pattern, timeout, self.output()))
            try:
                line = self._q.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError("the trainer ended before a line "
                                     "matching %r:\n%s"
                                     % (pattern, self.output()))
            m = re.search(pattern, line)
            if m:
                return m

    def wait(self, timeout=TIMEOUT):
        rc = self.proc.wait(timeout)
        self._reader.join(timeout)
        return rc

    def signal(self, sig):
        self.proc.send_signal(sig)

    def output(self):
        return "\n".join(self.lines)

    def final_params(self):
        found = [l for l in self.lines if l.startswith("final params: ")]
        assert len(found) == 1, self.output()
        return found[0][len("final params: "):]


def newest_step(ckpt_dir):
    steps = [int(m.group(1)) for m in
             (re.fullmatch(r"step-(\d+)\.done", n)
              for n in os.listdir(ckpt_dir)) if m]
    return max(steps) if steps else None


def restore_from(src_ckpt_dir, step, restore_dir):
    """What the supervisor does: restore_dir holds exactly step-N's files."""
    if os.path.exists(restore_dir):
        shutil.rmtree(restore_dir)
    shutil.copytree(os.path.join(src_ckpt_dir, "step-%d" % step),
                    restore_dir)


def read(path):
    with open(path) as f:
        return f.read()


class SgdTest(unittest.TestCase):
    reference = None  # (final params text, step-3000/params.json text, dir)

    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="slicectl-sgd-")
        ref = os.path.join(cls.root, "reference")
        t = Trainer(ref)
        rc = t.wait()
        assert rc == 0, t.output()
        cls.ref_dir = ref
        cls.ref_out = t
        cls.ref_final = t.final_params()
        cls.ref_last = read(os.path.join(ref, "step-%d" % STEPS,
                                         "params.json"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def dir(self, name):
        d = os.path.join(self.root, self.id().split(".")[-1], name)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        return d

    def test_uninterrupted_run(self):
        out = self.ref_out.output()
        self.assertIn("process 0/1 generation 1 starts", out)
        self.assertEqual(
            sorted(n for n in os.listdir(self.ref_dir) if n.endswith(".done")),
            sorted("step-%d.done" % s for s in range(EVERY, STEPS + 1, EVERY)))
        # The final line is the last checkpoint's parameters.
        last = json.loads(self.ref_last)
        self.assertEqual(last["step"], STEPS)
        self.assertEqual(json.dumps(last["params"], sort_keys=True),
                         self.ref_final)
        self.assertEqual(sorted(os.listdir(os.path.join(
            self.ref_dir, "step-%d" % STEPS))), ["params.json"])
        # And it learned the data's line: the true w and b from the seed.
        import random
        rng = random.Random(1234)
        true_w = [rng.uniform(-2.0, 2.0) for _ in range(8)]
        true_b = rng.uniform(-1.0, 1.0)
        params = json.loads(self.ref_final)
        for got, want in zip(params["w"] + [params["b"]], true_w + [true_b]):
            self.assertAlmostEqual(got, want, delta=0.05)
        # A second run gives the same bits.
        t = Trainer(self.dir("again"))
        self.assertEqual(t.wait(), 0, t.output())
        self.assertEqual(t.final_params(), self.ref_final)

    def test_ballast_weighs_checkpoints_and_changes_nothing_else(self):
        d = self.dir("ballast")
        t = Trainer(d, extra={"SGD_BALLAST_MB": "1"})
        self.assertEqual(t.wait(), 0, t.output())
        self.assertEqual(t.final_params(), self.ref_final)
        for step in (EVERY, STEPS):
            path = os.path.join(d, "step-%d" % step, "ballast.bin")
            self.assertEqual(os.path.getsize(path), 1 << 20)
        bad = Trainer(self.dir("bad"), extra={"SGD_BALLAST_MB": "-1"})
        self.assertNotEqual(bad.wait(), 0)
        self.assertIn("SGD_BALLAST_MB must be from 0 to 4096", bad.output())

    def test_sigterm_at_several_points_then_resume_is_bit_identical(self):
        restore = self.dir("restore")
        prev = None           # (ckpt dir, step) to resume from
        saved_steps = []
        for gen, point in enumerate([230, 1240, 1250, 2720], start=1):
            # Close to the previous stop, but after the step resumed
            # from however far the previous one went past its point.
            stop_after = max(point, ((prev[1] if prev else 0) // 10 + 2) * 10)
            ckpt = self.dir("gen-%d" % gen)
            if prev:
                restore_from(prev[0], prev[1], restore)
            t = Trainer(ckpt, restore if prev else None,
                        prev[1] if prev else None, generation=gen,
                        extra={"SGD_STEP_S": "0.001"})
            t.wait_line(r"^step %d loss" % stop_after)
            t.signal(signal.SIGTERM)
            self.assertEqual(t.wait(), 0, t.output())
            m = re.search(r"SIGTERM: step (\d+) (saved|was saved already)",
                          t.output())
            self.assertTrue(m, t.output())
            step = int(m.group(1))
            self.assertGreaterEqual(step, stop_after)
            self.assertEqual(newest_step(ckpt), step, t.output())
            self.assertNotIn("final params", t.output())
            if prev:
                self.assertIn("resumes from step %d" % prev[1], t.output())
            saved_steps.append(step)
            prev = (ckpt, step)
        # The last one goes to the end.
        ckpt = self.dir("last")
        restore_from(prev[0], prev[1], restore)
        t = Trainer(ckpt, restore, prev[1], generation=5)
        self.assertEqual(t.wait(), 0, t.output())
        self.assertEqual(t.final_params(), self.ref_final,
                         "resumed through steps %s" % saved_steps)
        self.assertEqual(read(os.path.join(ckpt, "step-%d" % STEPS,
                                           "params.json")), self.ref_last)

    def test_resume_from_any_periodic_checkpoint(self):
        # After SIGKILL nothing is saved at the end: the newest periodic
        # checkpoint is what is left.
        killed = self.dir("killed")
        t = Trainer(killed, extra={"SGD_STEP_S": "0.001"})
        t.wait_line(r"^step 1120 loss")
        t.signal(signal.SIGKILL)
        t.wait()
        left = newest_step(killed)
        self.assertIn(left, range(1000, STEPS, EVERY))
        sources = [(killed, left)] + [(self.ref_dir, s)
                                      for s in range(EVERY, STEPS, EVERY)]
        for src, step in sources:
            restore = self.dir("restore-%d" % step)
            restore_from(src, step, restore)
            ckpt = self.dir("from-%d" % step)
            t = Trainer(ckpt, restore, step, generation=2)
            self.assertEqual(t.wait(), 0, t.output())
            self.assertEqual(t.final_params(), self.ref_final,
                             "resumed from step %d" % step)
        # Restored from the very last step: nothing left to train, the
        # final parameters again, and no checkpoint written twice.
        restore = self.dir("restore-last")
        restore_from(self.ref_dir, STEPS, restore)
        ckpt = self.dir("from-last")
        t = Trainer(ckpt, restore, STEPS, generation=2)
        self.assertEqual(t.wait(), 0, t.output())
        self.assertEqual(t.final_params(), self.ref_final)
        self.assertIsNone(newest_step(ckpt))

    def test_restores_that_cannot_reproduce_the_run_are_refused(self):
        restore = self.dir("restore")
        restore_from(self.ref_dir, 1000, restore)
        t = Trainer(self.dir("wrong-step"), restore, 1500)
        self.assertNotEqual(t.wait(), 0)
        self.assertIn("SLICE_RESTORE_STEP is 1500", t.output())
        t = Trainer(self.dir("wrong-seed"), restore, 1000,
                    extra={"SGD_SEED": "99"})
        self.assertNotEqual(t.wait(), 0)
        self.assertIn("would not reproduce the run", t.output())
        t = Trainer(self.dir("bad-setting"), extra={"SGD_STEPS": "many"})
        self.assertNotEqual(t.wait(), 0)
        self.assertIn("SGD_STEPS", t.output())
        # SIGTERM before the first step: nothing to save, exit 0.
        ckpt = self.dir("early")
        t = Trainer(ckpt, extra={"SGD_STEP_S": "0.01"})
        t.wait_line(r"starts")
        t.signal(signal.SIGTERM)
        self.assertEqual(t.wait(), 0, t.output())

    def two(self, name, gen=1, restore=None, extra=None):
        """Two processes sharing the data through one sync directory."""
        sync = self.dir(name + "-sync")
        ts = []
        for p in range(2):
            kw = {}
            if restore:
                kw = {"restore_dir": restore[p][0],
                      "restore_step": restore[p][1]}
            ts.append(Trainer(self.dir("%s-p%d" % (name, p)), generation=gen,
                              process=p, processes=2,
                              extra=dict({"SGD_SYNC_DIR": sync},
                                         **(extra or {})), **kw))
        return ts

    def test_two_processes_stop_together_and_resume_identically(self):
        ref = self.two("ref")
        for t in ref:
            self.assertEqual(t.wait(), 0, t.output())
        final = ref[0].final_params()
        self.assertEqual(ref[1].final_params(), final)
        self.assertIn("sharded", ref[0].output())
        self.assertNotEqual(final, self.ref_final)  # other batches

        # Both stopped (a preemption): the same step saved by both.
        ts = self.two("stopped", extra={"SGD_STEP_S": "0.001"})
        ts[0].wait_line(r"^step 700 loss")
        for t in ts:
            t.signal(signal.SIGTERM)
        for t in ts:
            self.assertEqual(t.wait(), 0, t.output())
        steps = [newest_step(t.ckpt_dir) for t in ts]
        self.assertEqual(steps[0], steps[1])

        # Only process 0 stopped: process 1 saves the same step and
        # leaves with 75, so that its supervisor restarts the group.
        restores = []
        for p, t in enumerate(ts):
            r = self.dir("restore-a-p%d" % p)
            restore_from(t.ckpt_dir, steps[p], r)
            restores.append((r, steps[p]))
        ts = self.two("one", gen=2, restore=restores,
                      extra={"SGD_STEP_S": "0.001"})
        ts[1].wait_line(r"^step 1600 loss")
        ts[0].signal(signal.SIGTERM)
        self.assertEqual(ts[0].wait(), 0, ts[0].output())
        self.assertEqual(ts[1].wait(), 75, ts[1].output())
        self.assertIn("another process stopped", ts[1].output())
        steps = [newest_step(t.ckpt_dir) for t in ts]
        self.assertEqual(steps[0], steps[1])
        self.assertGreaterEqual(steps[0], 1600)

        restores = []
        for p, t in enumerate(ts):
            r = self.dir("restore-b-p%d" % p)
            restore_from(t.ckpt_dir, steps[p], r)
            restores.append((r, steps[p]))
        ts = self.two("end", gen=3, restore=restores)
        for t in ts:
            self.assertEqual(t.wait(), 0, t.output())
            self.assertEqual(t.final_params(), final)


if __name__ == "__main__":
    unittest.main(verbosity=2)
