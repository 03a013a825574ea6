#!/usr/bin/env python3
"""Data-parallel training with torch.distributed (gloo), following
slicectl's trainer contract (docs/DESIGN.md, "Trainer environment" and
"Checkpoint hand-off"), deterministic to the bit.

A small MLP regresses a random teacher's outputs. Every rank trains on its
shard of the data (points i with i % WORLD_SIZE == RANK); each step its
gradients are flattened into one vector and summed with an explicit
all_reduce, then every rank applies the same mean gradient with SGD and
momentum, so all ranks hold the same parameters, bit for bit.
DistributedDataParallel is not used: it rebuilds its gradient buckets
after the first iteration, so a run resumed from a checkpoint would sum
in another order than an uninterrupted one.

* The process group comes from the environment torchrun defines
  (init_method="env://": MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), which
  slice-supervisor sets for one process per host, and torchrun for each
  of its processes when it runs this file with --nproc-per-node.
* The data set and the first parameters come from TORCH_SEED; the batch of
  step t on rank r from a generator seeded with (seed, t, r) alone, so no
  random state has to be saved.
* Every TORCH_CKPT_EVERY steps, step t is written (by local rank 0: the
  parameters and momentum are the same on every rank) to
  $SLICE_CHECKPOINT_DIR/step-t/model.pt, then step-t.done is created; when
  $SLICE_RESTORE_DIR is set every rank resumes from the model.pt in it.
* SIGTERM: the rank asks the others, inside the next step's all_reduce,
  to stop before that step; every rank saves the same last step. The ranks
  told to stop exit 0, the others 75 (the supervisor restarts the group).
* After each step local rank 0 writes it to $SLICE_STEP_FILE (progress for
  the hang timeout).
* At TORCH_STEPS every rank prints "final params: SHA256" of its
  parameters' bytes, and "final loss: L".

Settings (environment, with defaults): TORCH_SEED 1234, TORCH_STEPS 600,
TORCH_CKPT_EVERY 50, TORCH_DIM 16, TORCH_HIDDEN 32, TORCH_SAMPLES 4096,
TORCH_BATCH 32, TORCH_LR 0.05, TORCH_MOMENTUM 0.9, TORCH_PRINT_EVERY 25,
TORCH_STEP_S 0 (a sleep per step), TORCH_TIMEOUT_S 300 (gloo's timeout).
"""

import datetime
import hashlib
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

env = os.environ


def setting(name, default, kind=int):
    text = env.get(name, "")
    if text == "":
        return default
    try:
        return kind(text)
    except ValueError:
        sys.exit("train.py: %s=%r is not a %s"
                 % (name, text, "integer" if kind is int else "number"))


SEED = setting("TORCH_SEED", 1234)
STEPS = setting("TORCH_STEPS", 600)
EVERY = setting("TORCH_CKPT_EVERY", 50)
DIM = setting("TORCH_DIM", 16)
HIDDEN = setting("TORCH_HIDDEN", 32)
SAMPLES = setting("TORCH_SAMPLES", 4096)
BATCH = setting("TORCH_BATCH", 32)
LR = setting("TORCH_LR", 0.05, float)
MOMENTUM = setting("TORCH_MOMENTUM", 0.9, float)
PRINT_EVERY = setting("TORCH_PRINT_EVERY", 25)
STEP_S = setting("TORCH_STEP_S", 0.0, float)
TIMEOUT_S = setting("TORCH_TIMEOUT_S", 300)

CKPT_DIR = env.get("SLICE_CHECKPOINT_DIR")
STEP_FILE = env.get("SLICE_STEP_FILE")
LOCAL_RANK = int(env.get("LOCAL_RANK", "0"))
if not CKPT_DIR:
    sys.exit("train.py: SLICE_CHECKPOINT_DIR is not set (run it under "
             "slice-supervisor, or set it by hand)")
if min(STEPS, EVERY, DIM, HIDDEN, SAMPLES, BATCH, PRINT_EVERY) < 1:
    sys.exit("train.py: TORCH_STEPS, TORCH_CKPT_EVERY, TORCH_DIM, "
             "TORCH_HIDDEN, TORCH_SAMPLES, TORCH_BATCH and "
             "TORCH_PRINT_EVERY must be at least 1")

stopping = False


def on_term(signum, frame):
    global stopping
    stopping = True


def make_data():
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(SAMPLES, DIM, generator=g, dtype=torch.float64)
    w1 = torch.randn(DIM, HIDDEN, generator=g, dtype=torch.float64)
    w2 = torch.randn(HIDDEN, 1, generator=g, dtype=torch.float64)
    y = torch.tanh(x @ w1) @ w2 / HIDDEN ** 0.5
    y += 0.01 * torch.randn(SAMPLES, 1, generator=g, dtype=torch.float64)
    return x, y


def make_model():
    torch.manual_seed(SEED + 1)
    return torch.nn.Sequential(
        torch.nn.Linear(DIM, HIDDEN), torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN, 1)).double()


def lr_at(step):
    return LR / (1.0 + step / 1000.0)


def save(step, model, velocity, config):
    d = os.path.join(CKPT_DIR, "step-%d" % step)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.pt")
    with open(path, "wb") as f:
        torch.save({"step": step, "config": config,
                    "params": model.state_dict(), "velocity": velocity}, f)
        f.flush()
        os.fsync(f.fileno())
    with open(os.path.join(CKPT_DIR, "step-%d.done" % step), "w"):
        pass


def restore(model, config):
    d = env["SLICE_RESTORE_DIR"]
    ck = torch.load(os.path.join(d, "model.pt"))
    want = env.get("SLICE_RESTORE_STEP")
    if want is not None and int(want) != ck["step"]:
        sys.exit("train.py: %s holds step %d but SLICE_RESTORE_STEP is %s"
                 % (d, ck["step"], want))
    if ck["config"] != config:
        sys.exit("train.py: the checkpoint was written with %s, this run "
                 "has %s; resuming would not reproduce the run"
                 % (ck["config"], config))
    model.load_state_dict(ck["params"])
    return ck["step"], ck["velocity"]


def report(step):
    # Replaced whole, so the supervisor never reads half a number.
    if STEP_FILE and LOCAL_RANK == 0:
        tmp = STEP_FILE + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % step)
        os.replace(tmp, STEP_FILE)


def digest(model):
    h = hashlib.sha256()
    for t in model.state_dict().values():
        h.update(t.contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    signal.signal(signal.SIGTERM, on_term)
    torch.set_num_threads(1)   # the same arithmetic on every machine
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    rank, world = dist.get_rank(), dist.get_world_size()
    if SAMPLES < world:
        sys.exit("train.py: TORCH_SAMPLES must be at least WORLD_SIZE")
    config = {"seed": SEED, "dim": DIM, "hidden": HIDDEN,
              "samples": SAMPLES, "batch": BATCH, "lr": LR,
              "momentum": MOMENTUM, "world": world}
    x, y = make_data()
    shard = torch.arange(rank, SAMPLES, world)
    model = make_model()
    params = list(model.parameters())
    if env.get("SLICE_RESTORE_DIR"):
        step, velocity = restore(model, config)
        saved, how = step, "resumes from step %d" % step
    else:
        step, saved, how = 0, 0, "starts"
        velocity = [torch.zeros_like(p) for p in params]
    print("rank %d/%d (local %d) generation %s %s"
          % (rank, world, LOCAL_RANK, env.get("SLICE_GENERATION", "?"), how),
          flush=True)
    stopped_here = False
    while step < STEPS:
        g = torch.Generator().manual_seed(
            ((SEED * 1000003) + step + 1) * 65537 + rank)
        idx = shard[torch.randint(len(shard), (BATCH,), generator=g)]
        model.zero_grad()
        loss = torch.mean((model(x[idx]) - y[idx]) ** 2)
        loss.backward()
        # One flat vector, one all_reduce, always in the same order; its
        # last element counts the ranks that were told to stop.
        flat = torch.cat([p.grad.reshape(-1) for p in params] +
                         [torch.tensor([1.0 if stopping else 0.0],
                                       dtype=torch.float64)])
        dist.all_reduce(flat)
        if flat[-1].item() > 0:
            stopped_here = stopping
            break
        grad = flat[:-1] / world
        lr = lr_at(step + 1)
        at = 0
        with torch.no_grad():
            for p, v in zip(params, velocity):
                n = p.numel()
                v.mul_(MOMENTUM).add_(grad[at:at + n].view_as(p))
                p.sub_(lr * v)
                at += n
        step += 1
        if STEP_S > 0:
            time.sleep(STEP_S)
        if step % PRINT_EVERY == 0 and rank == 0:
            print("step %d loss %.6g" % (step, loss.item()), flush=True)
        if step % EVERY == 0 and LOCAL_RANK == 0:
            save(step, model, velocity, config)
        if step % EVERY == 0:
            saved = step
        report(step)
    if step < STEPS:
        if step > saved and LOCAL_RANK == 0:
            save(step, model, velocity, config)
        if not stopped_here:
            print("rank %d: another rank stopped before step %d; leaving "
                  "so the group restarts" % (rank, step + 1), flush=True)
            return 75
        print("rank %d: SIGTERM: step %d saved" % (rank, step), flush=True)
        return 0
    if saved != step and LOCAL_RANK == 0:
        save(step, model, velocity, config)
    print("final params: %s" % digest(model), flush=True)
    print("final loss: %.17g" % loss.item(), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
