#!/usr/bin/env python3
"""A toy trainer that follows slicectl's trainer contract (docs/DESIGN.md).

It counts steps: every TOY_STEP_S seconds one step, a line of output per
step, and every TOY_CKPT_EVERY steps a checkpoint: $SLICE_CHECKPOINT_DIR/
step-N/state.json, then step-N.done. It resumes from $SLICE_RESTORE_DIR
when the supervisor restored a step, and stops after TOY_TOTAL steps with
exit 0. On SIGTERM it writes the step it is at as a final checkpoint and
exits, as a real trainer should.

Faults, for tests, each "PROCESS:STEP:GENERATION" (any field may be *):
  TOY_CRASH_AT   exit 3 when reaching STEP
  TOY_HANG_AT    stop printing and stepping at STEP (sleep forever)
TOY_FAULT_AFTER_COMMIT=N holds a fault until step N is committed in the
file:// run whose checkpoints/ folder TOY_CHECKPOINTS names: the process
waits (up to 120 s) for its COMMIT, so a test that needs step N committed
before the fault does not depend on how fast the upload ran.
TOY_QUIET=1 prints no line per step: with SLICE_STEP_FILE (written after
every step, as the contract's optional progress report) the supervisor
still sees it make progress.
TOY_EVENTS names a file where every process appends one line per event
("start", "restored", "ckpt", "final", "crash", "hang", "done"), so
tests can see what happened across restarts.

TOY_SYNC_DIR makes the processes step together, as a real multi-host
trainer does through its collectives: before each step every process
waits for all the others (marker files in that directory). A process
told to stop while it waits saves the step it completed, so all of them
save the same final step.
"""

import json
import os
import signal
import sys
import time

env = os.environ
pid = int(env["SLICE_PROCESS_ID"])
gen = int(env["SLICE_GENERATION"])
ckpt_dir = env["SLICE_CHECKPOINT_DIR"]
step_s = float(env.get("TOY_STEP_S", "0.1"))
every = int(env.get("TOY_CKPT_EVERY", "5"))
total = int(env.get("TOY_TOTAL", "20"))
state = {"step": 0, "params": 1}
stopping = False


def event(what, **kw):
    path = env.get("TOY_EVENTS")
    if not path:
        return
    rec = {"process": pid, "generation": gen, "event": what,
           "step": state["step"], "time": time.time()}
    rec.update(kw)
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")


def matches(spec):
    for one in (spec or "").split(","):
        if not one:
            continue
        p, s, g = one.split(":")
        if ((p == "*" or int(p) == pid) and int(s) == state["step"]
                and (g == "*" or int(g) == gen)):
            return True
    return False


def save(step, what=None):
    d = os.path.join(ckpt_dir, "step-%d" % step)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "state.json"), "w") as f:
        json.dump(what or state, f)
    with open(os.path.join(ckpt_dir, "step-%d.done" % step), "w"):
        pass
    event("ckpt")


def await_fault_gate():
    gate = None
    if env.get("TOY_FAULT_AFTER_COMMIT"):
        gate = os.path.join(env["TOY_CHECKPOINTS"], "step-%010d" %
                            int(env["TOY_FAULT_AFTER_COMMIT"]), "COMMIT")
    deadline = time.monotonic() + 120
    while gate and not os.path.exists(gate) and not stopping:
        if time.monotonic() > deadline:
            print("TOY_FAULT_AFTER_COMMIT: %s never appeared" % gate, flush=True)
            return
        time.sleep(0.01)


def on_term(signum, frame):
    global stopping
    stopping = True


def barrier(step):
    """Waits for every process to reach step; False if told to stop."""
    d = env.get("TOY_SYNC_DIR")
    if not d:
        return True
    n = int(env["SLICE_NUM_PROCESSES"])
    mine = os.path.join(d, "g%d-s%d-p%d" % (gen, step, pid))
    with open(mine, "w"):
        pass
    while True:
        if stopping:
            return False
        here = sum(os.path.exists(os.path.join(d, "g%d-s%d-p%d" % (gen, step, p)))
                   for p in range(n))
        if here == n:
            return True
        time.sleep(0.005)


signal.signal(signal.SIGTERM, on_term)
restore = env.get("SLICE_RESTORE_DIR")
if restore:
    with open(os.path.join(restore, "state.json")) as f:
        state = json.load(f)
    if state["step"] != int(env["SLICE_RESTORE_STEP"]):
        print("restored step %d but SLICE_RESTORE_STEP is %s"
              % (state["step"], env["SLICE_RESTORE_STEP"]), flush=True)
        sys.exit(4)
    event("restored")
event("start", coordinator=env.get("MEGASCALE_COORDINATOR_ADDRESS"))
print("process %d generation %d starts at step %d"
      % (pid, gen, state["step"]), flush=True)
def final_step():
    """The step every process can save: a process may have completed one
    step more than a peer that stopped in the barrier before it, so each
    posts its step and all save the smallest (the faster ones from the
    state they kept from one step back)."""
    d = env.get("TOY_SYNC_DIR")
    if not d:
        return state
    n = int(env["SLICE_NUM_PROCESSES"])
    mine = os.path.join(d, "g%d-stop-p%d" % (gen, pid))
    # Renamed into place: a peer never reads it half written.
    with open(mine + ".tmp", "w") as f:
        f.write(str(state["step"]))
    os.replace(mine + ".tmp", mine)
    steps = {}
    deadline = time.time() + 3
    while len(steps) < n and time.time() < deadline:
        for p in range(n):
            try:
                with open(os.path.join(d, "g%d-stop-p%d" % (gen, p))) as f:
                    steps[p] = int(f.read())
            except (OSError, ValueError):
                pass
        time.sleep(0.005)
    low = min(steps.values()) if steps else state["step"]
    return prev if low < state["step"] else state


prev = dict(state)
while state["step"] < total:
    if stopping:
        final = final_step()
        save(final["step"], final)
        state = final
        event("final")
        print("SIGTERM: final step %d saved" % final["step"], flush=True)
        sys.exit(0)
    if matches(env.get("TOY_CRASH_AT")):
        await_fault_gate()
        event("crash")
        print("crashing at step %d" % state["step"], flush=True)
        sys.exit(3)
    if matches(env.get("TOY_HANG_AT")):
        await_fault_gate()
        event("hang")
        while True:
            time.sleep(3600)
    if not barrier(state["step"] + 1):
        continue
    time.sleep(step_s)
    prev = dict(state)
    state["step"] += 1
    state["params"] = (state["params"] * 31 + state["step"]) % 1000003
    if env.get("TOY_QUIET") != "1":
        print("step %d params %d" % (state["step"], state["params"]),
              flush=True)
    if env.get("SLICE_STEP_FILE"):
        with open(env["SLICE_STEP_FILE"] + ".tmp", "w") as f:
            f.write("%d\n" % state["step"])
        os.replace(env["SLICE_STEP_FILE"] + ".tmp", env["SLICE_STEP_FILE"])
    if state["step"] % every == 0:
        save(state["step"])
event("done")
print("done at step %d" % state["step"], flush=True)
