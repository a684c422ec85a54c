# SPDX-License-Identifier: MIT
"""Trains a small CNN on Fashion-MNIST twice, from the same seed, the same
initial weights and the same shuffles: once with torch.nn.Conv2d, once with
convgrad.torch.Conv2d (the first model's state_dict loaded), and compares
their curves, times and test accuracies.

The network (the same as the C example train_cnn):
  conv 3x3, 1 -> 16, pad 1  + ReLU + 2x2 max pool   28x28 -> 14x14
  conv 3x3, 16 -> 32, pad 1 + ReLU + 2x2 max pool   14x14 -> 7x7
  linear 1568 -> 128 + ReLU, linear 128 -> 10, cross-entropy
SGD with momentum 0.9 and weight decay 5e-4; the learning rate warmed up
linearly over the first 5% of the steps (at least 50, at most half the run),
then a cosine from --lr down to 0.

The two runs alternate epoch by epoch, so that the machine's noise falls on
both alike; each epoch's training time is measured alone (the test pass
after it is not counted). Both use the same CPUs: torch.set_num_threads
(--threads) and, for convgrad, a core mask of as many of this process's CPUs.

Data: Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist), or
--data-dir. Outputs in --out: train_torch.csv (a row per run and epoch) and
train_torch.png (both curves) with matplotlib if importable, else gnuplot.
Exit status 1 when a target is missed: --quick (a few hundred images), that
each run's loss falls; otherwise that both reach >= 90% test accuracy within
1 point of each other.
"""
import argparse
import csv
import ctypes
import gzip
import math
import os
import shutil
import subprocess
import sys
import time

# torch's OpenMP threads spin after every op by default (GOMP's active wait),
# holding the CPUs that convgrad's cores need next: measured here, convgrad's
# run took 1.26x as long with them spinning, torch's the same either way. Both
# runs wait passively unless the environment says otherwise.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402 (after the OpenMP policy: it is read at torch's start)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import convgrad  # noqa: E402
import convgrad.torch  # noqa: E402

DATA_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # of the training images
IMPLEMENTATIONS = ("torch", "convgrad")


def keep_freed_memory():
    """glibc hands a freed block of 128 KiB or more back to the kernel (its
    mmap and trim thresholds), so each step's fresh activations are faulted in
    page by page again: about 10 MB a step, over a million page faults in a
    run, in both runs alike. Raising the thresholds keeps the heap's pages; it
    is set once, before either run."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass  # not glibc: its allocator keeps its own policy


def parse_args():
    cpus = len(os.sched_getaffinity(0))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=DATA_DIR, help="the four idx .gz files (default %(default)s)")
    ap.add_argument("--epochs", type=int, default=None, help="default 8 (--quick: 2)")
    ap.add_argument("--batch", type=int, default=None, help="default 64 (--quick: 32)")
    ap.add_argument("--lr", type=float, default=0.05, help="peak learning rate (default %(default)s)")
    ap.add_argument("--threads", type=int, default=cpus,
                    help="CPUs for both runs (default: this process's, %(default)s)")
    ap.add_argument("--train-images", type=int, default=None,
                    help="use the first N training images (default all; --quick: 512)")
    ap.add_argument("--test-images", type=int, default=None,
                    help="use the first N test images (default all; --quick: 256)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="a smoke run: a few hundred images, 2 epochs")
    ap.add_argument("--out", default="train_torch-out", help="where the CSV and PNG go (default %(default)s)")
    a = ap.parse_args()
    # the defaults, --quick's where it is given, for what the command line left unset
    for name, full, quick in (("epochs", 8, 2), ("batch", 64, 32), ("train_images", None, 512),
                              ("test_images", None, 256)):
        if getattr(a, name) is None:
            setattr(a, name, quick if a.quick else full)
    for name in ("epochs", "batch", "train_images", "test_images"):
        if getattr(a, name) is not None and getattr(a, name) < 1:
            ap.error("--%s must be at least 1" % name.replace("_", "-"))
    if not 1 <= a.threads <= cpus:
        ap.error("--threads must be 1..%d (this process's CPUs)" % cpus)
    return a


def read_idx(path):
    """An idx file (gzip): uint8 images [N][28][28] or labels [N]."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data_dir, split, count):
    names = ["%s-images-idx3-ubyte.gz" % split, "%s-labels-idx1-ubyte.gz" % split]
    paths = [os.path.join(data_dir, n) for n in names]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        sys.exit("train_torch: %s missing: install Debian's dataset-fashion-mnist "
                 "(apt-get install dataset-fashion-mnist) or give --data-dir" % ", ".join(missing))
    images, labels = (read_idx(p)[:count] for p in paths)
    x = (images.astype(np.float32) / 255 - MEAN) / STD
    return torch.from_numpy(x[:, None]), torch.from_numpy(labels.astype(np.int64))


class Net(torch.nn.Module):
    def __init__(self, conv):
        super().__init__()
        self.conv1 = conv(1, 16, 3, padding=1)
        self.conv2 = conv(16, 32, 3, padding=1)
        self.fc1 = torch.nn.Linear(32 * 7 * 7, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def learning_rate(step, steps, peak):
    warm = min(max(50, steps // 20), steps // 2)
    if step < warm:
        return peak * (step + 1) / warm
    return peak * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm)))


class Run:
    """One implementation's model, optimiser and curve."""

    def __init__(self, name, model, lr):
        self.name, self.model, self.rows = name, model, []
        self.optimiser = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
        self.first_loss = None

    def epoch(self, x, y, order, batch, step0, steps, peak):
        self.model.train()
        total_loss, correct = 0.0, 0
        start = time.perf_counter()
        for i, first in enumerate(range(0, len(order), batch)):
            index = order[first:first + batch]
            for group in self.optimiser.param_groups:
                group["lr"] = learning_rate(step0 + i, steps, peak)
            out = self.model(x[index])
            loss = F.cross_entropy(out, y[index])
            self.optimiser.zero_grad(set_to_none=True)
            loss.backward()
            self.optimiser.step()
            total_loss += loss.item() * len(index)
            correct += int((out.argmax(1) == y[index]).sum())
            if self.first_loss is None:
                self.first_loss = loss.item()
        seconds = time.perf_counter() - start
        return total_loss / len(order), correct / len(order), seconds

    @torch.no_grad()
    def accuracy(self, x, y, batch=1000):
        self.model.eval()
        correct = sum(int((self.model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum())
                      for i in range(0, len(x), batch))
        return correct / len(x)


def plot(rows, out_dir):
    """train_torch.png: loss and test accuracy per epoch, both runs."""
    png = os.path.join(out_dir, "train_torch.png")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        plt = None
    if plt is not None:
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
        for name in IMPLEMENTATIONS:
            mine = [r for r in rows if r["run"] == name]
            epochs = [r["epoch"] for r in mine]
            left.plot(epochs, [r["train_loss"] for r in mine], marker="o", label=name)
            right.plot(epochs, [100 * r["test_accuracy"] for r in mine], marker="o", label=name)
        left.set(xlabel="epoch", ylabel="training loss")
        right.set(xlabel="epoch", ylabel="test accuracy (%)")
        left.legend()
        right.legend()
        fig.tight_layout()
        fig.savefig(png)
        return "plot: %s (matplotlib)" % png
    if not shutil.which("gnuplot"):
        return "plot skipped: neither matplotlib nor gnuplot is available"
    data = os.path.join(out_dir, "train_torch.dat")
    with open(data, "w") as f:
        for name in IMPLEMENTATIONS:
            f.write("# %s\n" % name)
            for r in (r for r in rows if r["run"] == name):
                f.write("%d %g %g\n" % (r["epoch"], r["train_loss"], 100 * r["test_accuracy"]))
            f.write("\n\n")
    script = (
        "set terminal pngcairo size 1100,420\nset output '%s'\nset multiplot layout 1,2\n"
        "set xlabel 'epoch'\nset ylabel 'training loss'\n"
        "plot '%s' index 0 using 1:2 with linespoints title 'torch', "
        "'' index 1 using 1:2 with linespoints title 'convgrad'\n"
        "set ylabel 'test accuracy (%%)'\n"
        "plot '%s' index 0 using 1:3 with linespoints title 'torch', "
        "'' index 1 using 1:3 with linespoints title 'convgrad'\nunset multiplot\n"
    ) % (png, data, data)
    r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if r.returncode != 0:
        return "plot failed (gnuplot): %s" % r.stderr.strip()
    return "plot: %s (gnuplot)" % png


def main():
    a = parse_args()
    keep_freed_memory()
    cpus = sorted(os.sched_getaffinity(0))[:a.threads]
    core_mask = sum(1 << c for c in cpus if c < 32)
    torch.set_num_threads(a.threads)
    x_train, y_train = load(a.data_dir, "train", a.train_images)
    x_test, y_test = load(a.data_dir, "t10k", a.test_images)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print("train_torch: convgrad %s (%s), torch %s, CPU %s" % (
        convgrad.__version__, convgrad.LIBRARY_PATH, torch.__version__, cpu))
    print("%d training and %d test images, %d epochs, batch %d, lr %g, %d thread(s), core_mask %#x,"
          " OMP_WAIT_POLICY=%s" % (len(x_train), len(x_test), a.epochs, a.batch, a.lr, a.threads,
                                   core_mask, os.environ["OMP_WAIT_POLICY"]))

    torch.manual_seed(a.seed)
    reference = Net(torch.nn.Conv2d)
    ours = Net(lambda *args, **kw: convgrad.torch.Conv2d(*args, core_mask=core_mask, **kw))
    ours.load_state_dict(reference.state_dict())
    runs = [Run("torch", reference, a.lr), Run("convgrad", ours, a.lr)]

    steps_per_epoch = math.ceil(len(x_train) / a.batch)
    steps = a.epochs * steps_per_epoch
    rows = []
    for epoch in range(1, a.epochs + 1):
        order = torch.from_numpy(np.random.default_rng([a.seed, epoch]).permutation(len(x_train)))
        for run in runs:
            loss, train_acc, seconds = run.epoch(x_train, y_train, order, a.batch,
                                                 (epoch - 1) * steps_per_epoch, steps, a.lr)
            test_acc = run.accuracy(x_test, y_test)
            rows.append(dict(run=run.name, epoch=epoch, train_loss=loss, train_accuracy=train_acc,
                             test_accuracy=test_acc, seconds=seconds))
            print("epoch %d/%d %-8s loss %.4f  train %.2f%%  test %.2f%%  %.2f s" % (
                epoch, a.epochs, run.name, loss, 100 * train_acc, 100 * test_acc, seconds),
                flush=True)

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "train_torch.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("csv: %s" % os.path.join(a.out, "train_torch.csv"))
    print(plot(rows, a.out))

    print("\n%-8s %10s %10s %12s %14s" % ("run", "1st loss", "last loss", "test acc", "train time"))
    final = {}
    for run in runs:
        mine = [r for r in rows if r["run"] == run.name]
        final[run.name] = (mine[-1]["train_loss"], mine[-1]["test_accuracy"],
                           sum(r["seconds"] for r in mine))
        print("%-8s %10.4f %10.4f %11.2f%% %12.2f s" % (run.name, run.first_loss, final[run.name][0],
                                                     100 * final[run.name][1], final[run.name][2]))
    ratio = final["torch"][2] / final["convgrad"][2]
    print("convgrad's training time: %.3fx torch's speed (%s)" % (
        ratio, "as fast or faster" if ratio >= 1 else "slower"))

    if a.quick:
        missed = [r.name for r in runs if not final[r.name][0] < r.first_loss]
        target = "each run's last epoch loss below its first batch's"
    else:
        accs = [final[n][1] for n in IMPLEMENTATIONS]
        missed = [] if min(accs) >= 0.90 and abs(accs[0] - accs[1]) <= 0.01 else list(IMPLEMENTATIONS)
        target = "both >= 90% test accuracy, within 1 point of each other"
    print("target (%s): %s" % (target, "met" if not missed else "MISSED"))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
