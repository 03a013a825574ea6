#!/usr/bin/env python3
"""Linear regression by SGD with momentum, following slicectl's trainer
contract (docs/DESIGN.md, "Trainer environment" and "Checkpoint hand-off").

Pure Python (standard library only), deterministic to the bit:

* The data set is generated from SGD_SEED: SGD_SAMPLES points in
  SGD_DIM dimensions, y = w.x + b + noise, with w and b drawn from the
  same seed.
* The minibatch of step t on process p comes from a random generator
  seeded with (seed, t, p) alone, so a run resumed from any checkpoint
  draws exactly the batches an uninterrupted run draws: no random state
  has to be saved.
* A checkpoint holds the step, the parameters, the momentum buffer and
  the settings that change the arithmetic; floats are written as JSON
  with Python's shortest round-tripping repr, so they read back to the
  same bits.

Contract:

* Every SGD_CKPT_EVERY steps, step t is written to
  $SLICE_CHECKPOINT_DIR/step-t/params.json, then step-t.done is created.
* When $SLICE_RESTORE_DIR is set, training resumes from the params.json
  in it (its step must be $SLICE_RESTORE_STEP).
* SIGTERM: the step in progress is finished, saved as a checkpoint, and
  the process exits 0.
* After each step t, t is written to $SLICE_STEP_FILE when it is set
  (the optional progress report: the supervisor's heartbeat shows it,
  and it counts as progress against the hang timeout).
* At SGD_STEPS the last step is saved as a checkpoint (unless it is
  already), and one line "final params: {JSON}" is printed, so a run's
  final parameters can be read from its output and from the bucket.

Several processes (SLICE_NUM_PROCESSES > 1) with SGD_SYNC_DIR set each
train on their shard of the data (points i with i % P == p) and average
their gradients every step through files in that directory, which all of
them must see (the local provider's workers share a disk; real hosts
would use a collective instead). A process told to stop before it posts
its gradient for a step posts a stop mark instead, and a step completes
only when every process posted its gradient, so all of them save the
same final step. Without SGD_SYNC_DIR each process trains the whole data
set alone, as identical replicas.

Settings (environment, with defaults): SGD_SEED 1234, SGD_STEPS 3000,
SGD_CKPT_EVERY 500, SGD_DIM 8, SGD_SAMPLES 4096, SGD_BATCH 32, SGD_LR
0.05, SGD_MOMENTUM 0.9, SGD_PRINT_EVERY 100, SGD_STEP_S 0 (a sleep per
step, to make a demonstration last), SGD_SYNC_DIR (none), SGD_STEP_LOG
(none: else process 0 appends "GENERATION STEP UNIX_TIME" to that file
after each step, the trainer's own account that tests check slicectl
goodput against), SGD_BALLAST_MB 0 (each checkpoint also holds that many
MiB of incompressible bytes, never read back, to weigh it as a model's
does: benchmarks of the checkpoint tiers use it).
"""

import json
import math
import os
import random
import signal
import sys
import time

env = os.environ


def setting(name, default, kind=int):
    text = env.get(name, "")
    if text == "":
        return default
    try:
        return kind(text)
    except ValueError:
        sys.exit("train.py: %s=%r is not a%s %s"
                 % (name, text, "n" if kind is int else "",
                    "integer" if kind is int else "number"))


SEED = setting("SGD_SEED", 1234)
STEPS = setting("SGD_STEPS", 3000)
EVERY = setting("SGD_CKPT_EVERY", 500)
DIM = setting("SGD_DIM", 8)
SAMPLES = setting("SGD_SAMPLES", 4096)
BATCH = setting("SGD_BATCH", 32)
LR = setting("SGD_LR", 0.05, float)
MOMENTUM = setting("SGD_MOMENTUM", 0.9, float)
PRINT_EVERY = setting("SGD_PRINT_EVERY", 100)
STEP_S = setting("SGD_STEP_S", 0.0, float)
BALLAST_MB = setting("SGD_BALLAST_MB", 0)
SYNC_DIR = env.get("SGD_SYNC_DIR") or None
STOP_WAIT_S = 10.0   # how long a stopping process waits for the others

PID = int(env.get("SLICE_PROCESS_ID", "0"))
NPROC = int(env.get("SLICE_NUM_PROCESSES", "1"))
GEN = int(env.get("SLICE_GENERATION", "1"))
RUN = env.get("SLICE_RUN", "run")
STEP_FILE = env.get("SLICE_STEP_FILE")
STEP_LOG = env.get("SGD_STEP_LOG") if PID == 0 else None
CKPT_DIR = env.get("SLICE_CHECKPOINT_DIR")
if not CKPT_DIR:
    sys.exit("train.py: SLICE_CHECKPOINT_DIR is not set (run it under "
             "slice-supervisor, or set it by hand)")
if min(STEPS, EVERY, DIM, SAMPLES, BATCH, PRINT_EVERY) < 1:
    sys.exit("train.py: SGD_STEPS, SGD_CKPT_EVERY, SGD_DIM, SGD_SAMPLES, "
             "SGD_BATCH and SGD_PRINT_EVERY must be at least 1")
if not 0 <= BALLAST_MB <= 4096:
    sys.exit("train.py: SGD_BALLAST_MB must be from 0 to 4096")
SHARDED = SYNC_DIR is not None and NPROC > 1
if SHARDED and SAMPLES < NPROC:
    sys.exit("train.py: SGD_SAMPLES must be at least SLICE_NUM_PROCESSES")

# What a checkpoint must agree with to be resumed bit for bit.
CONFIG = {"seed": SEED, "dim": DIM, "samples": SAMPLES, "batch": BATCH,
          "lr": LR, "momentum": MOMENTUM,
          "processes": NPROC if SHARDED else 1}

stopping = False


def on_term(signum, frame):
    global stopping
    stopping = True


def make_data():
    rng = random.Random(SEED)
    true_w = [rng.uniform(-2.0, 2.0) for _ in range(DIM)]
    true_b = rng.uniform(-1.0, 1.0)
    xs, ys = [], []
    for _ in range(SAMPLES):
        x = [rng.gauss(0.0, 1.0) for _ in range(DIM)]
        xs.append(x)
        ys.append(sum(wi * xi for wi, xi in zip(true_w, x)) + true_b
                  + rng.gauss(0.0, 0.1))
    return xs, ys


def step_rng(step):
    # Integer seeds are used as they are (no hashing of str or tuples,
    # whose randomisation would differ between processes).
    return random.Random(((SEED * 1000003) + step) * 65537 + PID)


def gradient(params, xs, ys, shard, step):
    """Mean-squared-error gradient and loss on this process's batch."""
    rng = step_rng(step)
    w, b = params["w"], params["b"]
    gw = [0.0] * DIM
    gb = 0.0
    loss = 0.0
    for _ in range(BATCH):
        i = shard[rng.randrange(len(shard))]
        x = xs[i]
        err = sum(wi * xi for wi, xi in zip(w, x)) + b - ys[i]
        for k in range(DIM):
            gw[k] += err * x[k]
        gb += err
        loss += err * err
    return [g / BATCH for g in gw] + [gb / BATCH], loss / BATCH


def lr_at(step):
    return LR / (1.0 + step / 1000.0)


def apply(params, velocity, grad, step):
    lr = lr_at(step)
    for k in range(DIM):
        velocity["w"][k] = MOMENTUM * velocity["w"][k] + grad[k]
        params["w"][k] -= lr * velocity["w"][k]
    velocity["b"] = MOMENTUM * velocity["b"] + grad[DIM]
    params["b"] -= lr * velocity["b"]


# ---- several processes: gradients averaged through marker files ----

def sync_path(step, pid):
    return os.path.join(SYNC_DIR, RUN, "g%d" % GEN,
                        "s%d-p%d.json" % (step, pid))


def post(step, record):
    path = sync_path(step, PID)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.rename(tmp, path)
    # Every process read step - 2's marks before it could post step - 1.
    try:
        os.unlink(sync_path(step - 2, PID))
    except FileNotFoundError:
        pass


def exchange(step, grad):
    """Posts this process's gradient for step and returns the mean of all
    of them; or None when the step does not complete: some process posted
    a stop mark, or this one is stopping and the others did not answer
    within STOP_WAIT_S."""
    post(step, {"grad": grad})
    grads = [None] * NPROC
    since = None
    while True:
        for p in range(NPROC):
            if grads[p] is not None:
                continue
            try:
                with open(sync_path(step, p)) as f:
                    rec = json.load(f)
            except FileNotFoundError:
                continue
            if "stop" in rec:
                return None
            grads[p] = rec["grad"]
        if all(g is not None for g in grads):
            break
        if stopping:
            since = since or time.monotonic()
            if time.monotonic() - since > STOP_WAIT_S:
                return None
        time.sleep(0.002)
    # Summed in process order: the same bits on every process.
    return [sum(g[k] for g in grads) / NPROC for k in range(DIM + 1)]


# ---- checkpoints ----

def save(step, params, velocity):
    d = os.path.join(CKPT_DIR, "step-%d" % step)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "params.json"), "w") as f:
        json.dump({"step": step, "config": CONFIG, "params": params,
                   "velocity": velocity}, f, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    if BALLAST_MB:
        with open(os.path.join(d, "ballast.bin"), "wb") as f:
            f.write(random.Random(step).randbytes(BALLAST_MB << 20))
    with open(os.path.join(CKPT_DIR, "step-%d.done" % step), "w"):
        pass


def report(step, log):
    # Replaced whole, so the supervisor never reads half a number.
    if STEP_FILE:
        tmp = STEP_FILE + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % step)
        os.replace(tmp, STEP_FILE)
    if log:
        log.write("%d %d %.6f\n" % (GEN, step, time.time()))
        log.flush()


def restore():
    d = env["SLICE_RESTORE_DIR"]
    with open(os.path.join(d, "params.json")) as f:
        ck = json.load(f)
    want = env.get("SLICE_RESTORE_STEP")
    if want is not None and int(want) != ck["step"]:
        sys.exit("train.py: %s holds step %d but SLICE_RESTORE_STEP is %s"
                 % (d, ck["step"], want))
    if ck["config"] != CONFIG:
        sys.exit("train.py: the checkpoint was written with %s, this run "
                 "has %s; resuming would not reproduce the run (set the "
                 "same SGD_* values, or start a new run)"
                 % (json.dumps(ck["config"], sort_keys=True),
                    json.dumps(CONFIG, sort_keys=True)))
    return ck["step"], ck["params"], ck["velocity"]


def params_text(params):
    return json.dumps(params, sort_keys=True)


def main():
    signal.signal(signal.SIGTERM, on_term)
    xs, ys = make_data()
    shard = (list(range(PID, SAMPLES, NPROC)) if SHARDED
             else list(range(SAMPLES)))
    if env.get("SLICE_RESTORE_DIR"):
        step, params, velocity = restore()
        saved = step
        how = "resumes from step %d" % step
    else:
        step, saved = 0, 0
        params = {"w": [0.0] * DIM, "b": 0.0}
        velocity = {"w": [0.0] * DIM, "b": 0.0}
        how = "starts"
    print("process %d/%d generation %d %s (seed %d, %d steps, %s)"
          % (PID, NPROC, GEN, how, SEED, STEPS,
             "sharded" if SHARDED else "whole data set"), flush=True)
    peer_stopped = False
    log = open(STEP_LOG, "a") if STEP_LOG else None
    while step < STEPS:
        if stopping:
            if SHARDED:
                # Not posted yet: the others learn this step will not
                # complete, so every process saves the same step.
                post(step + 1, {"stop": True})
            break
        grad, loss = gradient(params, xs, ys, shard, step + 1)
        if SHARDED:
            grad = exchange(step + 1, grad)
            if grad is None:
                peer_stopped = not stopping
                break
        apply(params, velocity, grad, step + 1)
        step += 1
        if STEP_S > 0:
            time.sleep(STEP_S)
        if step % PRINT_EVERY == 0:
            print("step %d loss %.6g" % (step, loss), flush=True)
        if step % EVERY == 0:
            save(step, params, velocity)
            saved = step
        report(step, log)
    if log:
        log.close()
    if step < STEPS:
        # Stopped early: the step completed last is saved (all processes
        # save the same one), unless there is nothing new to save.
        if step > saved:
            save(step, params, velocity)
            what = "step %d saved" % step
        else:
            what = "step %d was saved already" % step if step else \
                "nothing to save yet"
        if peer_stopped:
            # Not told to stop, but the group cannot go on: a non-zero
            # exit makes the supervisor restart the group from the
            # newest committed step.
            print("another process stopped before step %d; %s; leaving "
                  "so the group restarts" % (step + 1, what), flush=True)
            return 75
        print("SIGTERM: %s" % what, flush=True)
        return 0
    if saved != step:
        save(step, params, velocity)
    if any(not math.isfinite(v) for v in params["w"] + [params["b"]]):
        print("training diverged (lower SGD_LR)", flush=True)
        return 1
    print("final params: %s" % params_text(params), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
