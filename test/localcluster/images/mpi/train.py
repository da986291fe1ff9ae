"""Trains a handwritten-digit classifier data-parallel with MPI.

Every rank holds the same model, a multilayer perceptron (64 pixels, one
hidden layer, 10 classes), started from the same seed. Each step, every
rank computes the gradient of the cross-entropy on its own share of the
step's batch, an allreduce sums the shares, and every rank applies the same
update: the model stays identical on every rank, as in PyTorch's
DistributedDataParallel or Horovod. The data are the digits data set that
scikit-learn ships (UCI's optical recognition of handwritten digits: 1,797
images of 8x8 pixels, 16 grey levels), as the image keeps it beside this
file: a quarter is held out, stratified, to measure accuracy.

Rank 0 prints the hosts that train, the loss and accuracies each epoch,
reports the epoch's progress, the time left and the metrics to the job's
status where the job's environment names a status endpoint (Kubeflow
Trainer's TrainJob status API, which Torus serves), and saves the model (NumPy's .npz) to --output, through a temporary file so
that a reader never sees half a model. The run fails if the ranks' models
differ at the end or the test accuracy is below --min-accuracy.

With a checkpoint directory (--checkpoint-dir, else $TORUS_CHECKPOINT_DIR,
which Torus sets for a job with a checkpoint volume), rank 0 saves the
model, its optimiser state and the epoch after every --checkpoint-every
epochs, atomically, and a run that finds a checkpoint there continues from
it: every epoch's shuffle derives from the seed and the epoch alone, so a
run stopped and resumed ends with the same model, bit for bit, as one that
ran straight through.

  mpirun -n 4 python3 train.py --epochs 30 --output /models/digits.npz
  python3 train.py --evaluate /models/digits.npz
"""
import argparse
import datetime
import hashlib
import json
import os
import socket
import ssl
import sys
import time
import urllib.request

# One BLAS thread per rank: mpirun already starts a rank per slot.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

PARAMS = ("w1", "b1", "w2", "b2")
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "digits.csv.gz")


def data(seed, path=DATA):
    """Train and test rows: a quarter of each digit's images held out."""
    rows = np.loadtxt(path, delimiter=",")
    x, y = rows[:, :-1] / 16.0, rows[:, -1].astype(int)
    rng = np.random.default_rng(seed)
    test = np.zeros(len(y), dtype=bool)
    for digit in range(10):
        idx = rng.permutation(np.flatnonzero(y == digit))
        test[idx[:len(idx) // 4]] = True
    return x[~test], x[test], y[~test], y[test]


def init(seed, hidden):
    rng = np.random.default_rng(seed)
    return {
        "w1": rng.normal(0, np.sqrt(2 / 64), (64, hidden)),
        "b1": np.zeros(hidden),
        "w2": rng.normal(0, np.sqrt(2 / hidden), (hidden, 10)),
        "b2": np.zeros(10),
    }


def forward(m, x):
    h = np.maximum(x @ m["w1"] + m["b1"], 0)
    z = h @ m["w2"] + m["b2"]
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    return h, p


def gradients(m, x, y):
    """The summed (not averaged) loss and gradients over the rows of x."""
    h, p = forward(m, x)
    loss = -np.log(p[np.arange(len(y)), y] + 1e-12).sum()
    dz = p.copy()
    dz[np.arange(len(y)), y] -= 1
    dh = (dz @ m["w2"].T) * (h > 0)
    return loss, {"w1": x.T @ dh, "b1": dh.sum(0), "w2": h.T @ dz, "b2": dz.sum(0)}


def accuracy(m, x, y):
    return float((forward(m, x)[1].argmax(1) == y).mean())


def flat(m):
    return np.concatenate([m[k].ravel() for k in PARAMS])


CHECKPOINT = "checkpoint.npz"


def save_checkpoint(directory, epoch, args, m, velocity):
    """Writes the state after epoch to a temporary file, flushed to disk,
    then renames it over the last checkpoint: a run stopped mid-write
    leaves the previous checkpoint whole."""
    path = os.path.join(directory, CHECKPOINT)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        np.savez(f, epoch=epoch, seed=args.seed, hidden=args.hidden,
                 **{k: m[k] for k in PARAMS}, **{"v_" + k: velocity[k] for k in PARAMS})
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(directory, args):
    """The epoch a checkpoint was saved after, the model and its velocity;
    0 and nothing when there is none."""
    path = os.path.join(directory, CHECKPOINT)
    if not os.path.exists(path):
        return 0, None, None
    with np.load(path) as f:
        if int(f["seed"]) != args.seed or int(f["hidden"]) != args.hidden:
            raise SystemExit(f"{path} was saved by a training with --seed {int(f['seed'])} --hidden {int(f['hidden'])}, "
                             f"not --seed {args.seed} --hidden {args.hidden}: remove it, or train as it did")
        return int(f["epoch"]), {k: f[k] for k in PARAMS}, {k: f["v_" + k] for k in PARAMS}


class Progress:
    """Reports progress to the TrainJob's status: the URL, token and CA
    come from the variables the pod is given. A report that fails is said
    once and not tried again: the training never waits on its reports."""

    def __init__(self):
        self.url = os.environ.get("KUBEFLOW_TRAINER_SERVER_URL")
        self.context = None
        if self.url:
            self.context = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])

    def report(self, percent, remaining_seconds, **metrics):
        if not self.url:
            return
        with open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]) as f:
            token = f.read().strip()
        body = json.dumps({"trainerStatus": {
            "progressPercentage": int(percent),
            "estimatedRemainingSeconds": max(0, int(remaining_seconds)),
            "metrics": [{"name": k, "value": f"{v:.4f}"} for k, v in metrics.items()],
            "lastUpdatedTime": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        }}).encode()
        request = urllib.request.Request(self.url, data=body, method="POST", headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=5, context=self.context).close()
        except OSError as e:
            print(f"progress not reported ({e}); training goes on without reports", file=sys.stderr, flush=True)
            self.url = None


def train(args):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    x_train, x_test, y_train, y_test = data(args.seed)
    # Each rank's shard: every size-th example, so shards differ by one at most.
    xs, ys = x_train[rank::size], y_train[rank::size]
    local_batch = max(1, args.batch // size)
    steps = min(comm.allgather(len(xs))) // local_batch
    hosts = comm.gather(socket.gethostname(), root=0)
    if rank == 0:
        by_host = {}
        for r, host in enumerate(hosts):
            by_host.setdefault(host, []).append(r)
        for host, ranks in sorted(by_host.items()):
            print(f"ranks {','.join(map(str, ranks))} on {host}")
        print(f"training on {len(x_train)} digits ({len(x_test)} held out) with {size} ranks, "
              f"batch {local_batch * size}, {steps} steps per epoch", flush=True)

    m = init(args.seed, args.hidden)
    velocity = {k: np.zeros_like(v) for k, v in m.items()}
    start = 0
    if args.checkpoint_dir:
        state = load_checkpoint(args.checkpoint_dir, args) if rank == 0 else None
        start, saved, saved_velocity = comm.bcast(state, root=0)
        if saved is not None:
            m, velocity = saved, saved_velocity
        if rank == 0:
            attempt = os.environ.get("TORUS_RESTART_ATTEMPT", "0")
            where = f"from the checkpoint after epoch {start}" if start else "from the start"
            print(f"run {attempt}: training {where} (checkpoints in {args.checkpoint_dir})", flush=True)
    progress = Progress() if rank == 0 else None
    started = time.monotonic()
    for epoch in range(start + 1, args.epochs + 1):
        order = np.random.default_rng([args.seed, epoch, rank]).permutation(len(xs))
        totals = np.zeros(2)  # loss, examples
        for step in range(steps):
            idx = order[step * local_batch:(step + 1) * local_batch]
            loss, grads = gradients(m, xs[idx], ys[idx])
            # One allreduce for all gradients and the loss: the sum over
            # every rank's share of the batch.
            send = np.concatenate([flat(grads), [loss, len(idx)]])
            recv = np.empty_like(send)
            comm.Allreduce(send, recv, op=MPI.SUM)
            n = recv[-1]
            totals += recv[-2:]
            offset = 0
            for k in PARAMS:
                g = recv[offset:offset + m[k].size].reshape(m[k].shape) / n
                offset += m[k].size
                velocity[k] = args.momentum * velocity[k] - args.lr * g
                m[k] += velocity[k]
        if args.pace:
            # A longer training's epochs, for trying restarts and progress.
            time.sleep(args.pace)
        if rank == 0:
            loss, train_acc, test_acc = totals[0] / totals[1], accuracy(m, x_train, y_train), accuracy(m, x_test, y_test)
            print(f"epoch {epoch}/{args.epochs} loss {loss:.4f} "
                  f"train accuracy {train_acc:.4f} "
                  f"test accuracy {test_acc:.4f}", flush=True)
            per_epoch = (time.monotonic() - started) / (epoch - start)
            progress.report(100 * epoch / args.epochs, per_epoch * (args.epochs - epoch),
                            loss=loss, train_accuracy=train_acc, test_accuracy=test_acc)
            if args.checkpoint_dir and epoch % args.checkpoint_every == 0:
                save_checkpoint(args.checkpoint_dir, epoch, args, m, velocity)
                print(f"checkpoint saved after epoch {epoch}", flush=True)

    # Data parallelism holds only if every rank ends with the same model.
    digest = hashlib.sha256(flat(m).tobytes()).hexdigest()
    digests = comm.gather(digest, root=0)
    if rank != 0:
        return 0
    if len(set(digests)) != 1:
        print(f"the ranks' models differ: {digests}", file=sys.stderr)
        return 1
    test = accuracy(m, x_test, y_test)
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        tmp = f"{args.output}.{os.getpid()}.tmp.npz"
        np.savez(tmp, seed=args.seed, **m)
        os.replace(tmp, args.output)
        with open(args.output, "rb") as f:
            saved = hashlib.sha256(f.read()).hexdigest()
        print(f"model saved to {args.output} (sha256 {saved})")
    print(f"test accuracy {test:.4f} with {size} ranks")
    if test < args.min_accuracy:
        print(f"test accuracy {test:.4f} is below --min-accuracy {args.min_accuracy}", file=sys.stderr)
        return 1
    return 0


def evaluate(path):
    with np.load(path) as f:
        m = {k: f[k] for k in PARAMS}
        seed = int(f["seed"])
    _, x_test, _, y_test = data(seed)
    print(f"{path}: test accuracy {accuracy(m, x_test, y_test):.4f} on {len(x_test)} held-out digits")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch", type=int, default=64, help="global batch, split across the ranks")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", help="where rank 0 saves the model (.npz)")
    p.add_argument("--min-accuracy", type=float, default=0.0, help="fail below this test accuracy")
    p.add_argument("--evaluate", metavar="MODEL", help="print a saved model's test accuracy and exit")
    p.add_argument("--checkpoint-dir", default=os.environ.get("TORUS_CHECKPOINT_DIR"),
                   help="where rank 0 keeps the checkpoint a restarted run resumes from (default $TORUS_CHECKPOINT_DIR)")
    p.add_argument("--checkpoint-every", type=int, default=1, help="epochs between checkpoints")
    p.add_argument("--pace", type=float, default=0.0, help="seconds every rank waits after each epoch")
    args = p.parse_args()
    if args.evaluate:
        return evaluate(args.evaluate)
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
