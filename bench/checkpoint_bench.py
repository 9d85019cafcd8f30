#!/usr/bin/python3
"""Checkpoint save and restore against S3 behind a shaping front
(tests/servers/shaping_proxy.py: --first_byte_ms to the first byte of every
response, --rate_mbps per connection and direction), over real s3rver
processes that this script starts on one directory of its own (--s3rvers:
one s3rver is one Node process, about one core; several, with the front
spreading connections over them as a load balancer does, make a store that
the tools, not its CPU, limit where the machine has the cores). Prints one
table.

  save     R ranks each write one shard of --shard_mib MiB (random bytes),
           all at once.
  restore  R ranks each read all R shards (rank r starts with shard r), all at
           once: R x R x shard bytes reach the ranks.

Tools (--tools, in this order within each round):
  aws      Debian's /usr/bin/aws (awscli 2.9), default multipart settings
           (8 MiB parts, 10 requests at a time per process). save: one
           `aws s3 cp SHARD s3://...` per rank; restore: one
           `aws s3 cp --recursive s3://.../ DIR` per rank (to local disk,
           removed after the phase).
  s3fs     /usr/bin/s3fs (1.90) mounted against the front, no use_cache,
           defaults otherwise. save: one `cp` per rank into the mount;
           restore: one reader per rank, open/read of each shard.
  direct   plain requests with no client of note in the way (anonymous:
           s3rver serves unsigned requests). save: one process per rank, a
           multipart upload of its shard in 8 MiB parts with N parts in
           flight, one row for each N of --direct_parallel (10: aws-cli's
           default schedule with none of its CPU; the largest: the front's
           ceiling). restore: one process per rank, one keep-alive
           connection, whole-object GETs of each shard, read and dropped.
  larder   save: one `larder cp SHARD /ckpt/shard-R` per rank, each rank its
           own node with its own worker; restore: one reader per rank, the
           Python client (--larder_reader python) or `larder cat` of each
           shard (cat; the default where the Python module does not import).
  busy     dataset reads while a checkpoint uploads: --busy_readers Python
           readers loop over a warm dataset (--busy_files files of 1 MiB on
           a file:// mount, read once first so every block is cached) for
           --busy_seconds alone, then again while the ranks save their
           shards through Larder as above (with --busy_save direct, the
           control: plain multipart uploads of the same shards to the same
           store, Larder out of the save's way). Rows: "reads alone", "reads
           during" (the readers' MB/s) and "save during" (the save's).

Columns: wall seconds of the phase (from starting the rank processes to the
last exit: process start-up is part of each tool's cost), aggregate MB/s
(10^6 bytes the ranks moved / seconds), and what the front saw during the phase:
object GETs, PUTs (multipart parts included), other requests (HEAD, POST,
DELETE, listings), MB from and to the store, connections opened, and the CPU
seconds the front and s3rver used (on a 2-core machine they compete with the
tools: see bench/README.md).

  /usr/bin/python3 bench/checkpoint_bench.py [--ranks 4] [--shard_mib 64]
      [--first_byte_ms 25] [--rate_mbps 80] [--rounds 1]
      [--tools aws,s3fs,direct,larder,busy] [--s3rvers 1]
      [--direct_parallel 10,32] [--larder_reader python|cat]
      [--parallel_writes 8] [--busy_readers 2] [--busy_files 256]
      [--busy_seconds 15] [--busy_save larder|direct] [--ckpt_block_size 8MiB]
      [--drop_caches]
      [--dir /tmp] [--keep]
      [--aws /usr/bin/aws] [--s3fs /usr/bin/s3fs] [--node node]
      [--store_cpus 8-15 --node_cpus 0-7] [--worker_flags=--flag=value,...]

--store_cpus and --node_cpus give the store (s3rver, the front) and everything
else (this script, the tools, the Larder cluster, the readers) cores of their
own, as a store on other machines would be: then what a tool costs its node
shows apart from what the store costs. The documented run is --shard_mib 512. Needs node and tests/servers/node_modules
(scripts/install-deps.sh), awscli and s3fs (Debian packages; `apt-get install
awscli` if /usr/bin/aws is missing: a tool that is missing is skipped with a
note), and root for the FUSE mount.
"""
import argparse
import http.client
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import benchlib  # noqa: E402 (bench/, the script's own directory)
from benchlib import (PYTHON, ROOT, ShapingProxy, diff,  # noqa: E402
                      is_mounted, parse_cpus, proc_cpu)

BUCKET = "bench"

# One rank's reader: reads every path (or every http://host:port/path, with
# one keep-alive connection) into one reused buffer, prints the bytes read.
READER = r"""
import http.client, sys, urllib.parse
buf = bytearray(8 << 20)
total = 0
conn = None
for a in sys.argv[1:]:
    if a.startswith("http://"):
        u = urllib.parse.urlsplit(a)
        if conn is None:
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
        conn.request("GET", u.path)
        r = conn.getresponse()
        if r.status != 200:
            sys.exit("GET %s: %d %s" % (a, r.status, r.read()[:200]))
        while True:
            n = r.readinto(buf)
            if not n:
                break
            total += n
    else:
        with open(a, "rb", buffering=0) as f:
            while True:
                n = f.readinto(buf)
                if not n:
                    break
                total += n
print(total)
"""

# One rank's plain multipart upload: argv = endpoint bucket key file parallel
# part_bytes. Parts go on `parallel` threads, each with its own keep-alive
# connection; prints the bytes uploaded.
DIRECT_PUT = r"""
import concurrent.futures, http.client, os, re, sys, threading, urllib.parse
endpoint, bucket, key, path = sys.argv[1:5]
parallel, part = int(sys.argv[5]), int(sys.argv[6])
u = urllib.parse.urlsplit(endpoint)
local = threading.local()
def call(method, target, body=None):
    c = getattr(local, "c", None)
    if c is None:
        c = local.c = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
    c.request(method, target, body=body,
              headers={"Content-Length": str(len(body or b""))})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        sys.exit("%s %s: %d %s" % (method, target, r.status, data[:200]))
    return r, data
obj = "/%s/%s" % (bucket, key)
_, data = call("POST", obj + "?uploads")
upload = re.search(rb"<UploadId>([^<]+)</UploadId>", data).group(1).decode()
size = os.path.getsize(path)
fd = os.open(path, os.O_RDONLY)
def put(n):
    off = (n - 1) * part
    body = os.pread(fd, min(part, size - off), off)
    r, _ = call("PUT", "%s?partNumber=%d&uploadId=%s" % (obj, n, upload), body)
    return n, r.getheader("ETag")
count = max(1, (size + part - 1) // part)
with concurrent.futures.ThreadPoolExecutor(parallel) as ex:
    etags = dict(ex.map(put, range(1, count + 1)))
xml = "<CompleteMultipartUpload>%s</CompleteMultipartUpload>" % "".join(
    "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (n, etags[n])
    for n in sorted(etags))
call("POST", "%s?uploadId=%s" % (obj, upload), xml.encode())
print(size)
"""


class NotYet(Exception):
    """A runner that has nothing to measure yet (printed, no row)."""


class Row:
    def __init__(self, tool, phase, seconds, nbytes, delta, s3rver_cpu):
        self.tool, self.phase = tool, phase
        self.seconds, self.nbytes, self.delta = seconds, nbytes, delta
        self.s3rver_cpu = s3rver_cpu


class Env:
    """What a runner gets: the endpoints, the shards, the front's counters, and
    helpers to run ranks, time a phase and register cleanups."""

    def __init__(self, args, workdir):
        self.args = args
        self.ranks = args.ranks
        self.shard_bytes = args.shard_mib << 20
        self.workdir = workdir
        self.bucket = BUCKET
        # Every process started (the ranks' killed first) and the undos.
        self.procs = benchlib.Procs()
        self.state = {}  # Runners keep what they set up here, across rounds.
        self.round = 0
        self.shards = []  # Local shard files, one per rank.
        self.upstream = None  # http://127.0.0.1:PORT of s3rver, no shaping.
        self.proxy = None  # The ShapingProxy.
        self.endpoint = None  # http://127.0.0.1:PORT of the front.
        self.s3rver_pids = []

    # -- processes and cleanup --
    def spawn(self, cmd, log=None, first=False, **kw):
        """first: a rank's process, killed before the undos (nothing may be
        left writing into a mount that is unmounted)."""
        return self.procs.spawn(cmd, log=log, first=first, **kw)

    def defer(self, fn):
        self.procs.defer(fn)

    def cleanup(self):
        self.procs.cleanup()

    def log(self, name):
        return os.path.join(self.workdir, "logs", name)

    def run_ranks(self, cmds, env=None):
        """Starts one process per command at once, waits for all; returns
        (seconds, [stdout of each]). Raises if any fails."""
        procs = []
        t = time.monotonic()
        for i, cmd in enumerate(cmds):
            with open(self.log(f"rank{i}.err"), "ab") as err:
                procs.append(self.spawn(cmd, stdout=subprocess.PIPE,
                                        stderr=err, env=env, first=True))
        outs = []
        deadline = t + self.args.timeout
        for i, p in enumerate(procs):
            try:
                out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"rank {i} ran past --timeout: {cmds[i]}")
            outs.append(out.decode(errors="replace"))
        seconds = time.monotonic() - t
        for i, p in enumerate(procs):
            if p.returncode != 0:
                with open(self.log(f"rank{i}.err"), errors="replace") as f:
                    err = f.read()[-2000:]
                raise RuntimeError(f"rank {i} exited {p.returncode}: "
                                   f"{' '.join(cmds[i])}\n{err}")
        return seconds, outs

    def reader(self, paths):
        return [PYTHON, "-c", READER] + list(paths)

    def rotated(self, rank):
        return [(rank + j) % self.ranks for j in range(self.ranks)]

    # -- measuring --
    def drop_caches(self):
        if not self.args.drop_caches:
            return
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")

    def measure(self, tool, phase, nbytes, fn):
        """Times fn() (which returns its seconds, or None to use the wall
        time around it) and takes the front's counters around it."""
        if phase == "restore":
            self.drop_caches()
        before = self.proxy.stats()
        cpu = self.s3rver_cpu()
        t = time.monotonic()
        seconds = fn()
        wall = time.monotonic() - t
        cpu = self.s3rver_cpu() - cpu
        after = self.proxy.stats()
        return Row(tool, phase, seconds if seconds is not None else wall,
                   nbytes, diff(after, before), cpu)

    def s3rver_cpu(self):
        return sum(proc_cpu(p) for p in self.s3rver_pids)

    def save_bytes(self):
        return self.ranks * self.shard_bytes

    def restore_bytes(self):
        return self.ranks * self.ranks * self.shard_bytes


# ----------------------------------------------------------------- runners --
# Each runner is called once per round with the Env (env.round is 0, 1, ...)
# and returns its rows for that round: a list of Row, from env.measure().
# It may raise NotYet (printed, no row). Set-up it keeps across rounds goes in
# env.state, and its undoing in env.defer().


def aws_env(env):
    e = dict(os.environ)
    for k in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"):
        e.pop(k, None)
    e.update({
        "AWS_ACCESS_KEY_ID": "S3RVER",
        "AWS_SECRET_ACCESS_KEY": "S3RVER",
        "AWS_DEFAULT_REGION": "us-east-1",
        # No user configuration: the default multipart settings.
        "AWS_CONFIG_FILE": os.path.join(env.workdir, "aws-config-none"),
        "AWS_SHARED_CREDENTIALS_FILE": os.path.join(env.workdir, "aws-cred-none"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_PAGER": "",
    })
    return e


def aws_rows(env):
    aws = env.args.aws
    if not os.access(aws, os.X_OK):
        raise NotYet(f"{aws} missing (apt-get install awscli)")
    e = aws_env(env)
    base = [aws, "--endpoint-url", env.endpoint, "s3", "cp", "--only-show-errors",
            "--no-progress"]
    prefix = f"s3://{env.bucket}/aws"
    save = env.measure("aws", "save", env.save_bytes(), lambda: env.run_ranks(
        [base + [env.shards[r], f"{prefix}/shard-{r}"] for r in range(env.ranks)],
        env=e)[0])
    dirs = [os.path.join(env.workdir, "restore", f"aws-rank{r}")
            for r in range(env.ranks)]

    def restore():
        seconds, _ = env.run_ranks(
            [base + ["--recursive", prefix + "/", d] for d in dirs], env=e)
        for d in dirs:
            got = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
            if got != env.ranks * env.shard_bytes:
                raise RuntimeError(f"aws restore into {d}: {got} bytes")
        return seconds

    try:
        row = env.measure("aws", "restore", env.restore_bytes(), restore)
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    return [save, row]


def s3fs_mount(env):
    if "s3fs" in env.state:
        return env.state["s3fs"]
    d = os.path.join(env.workdir, "s3fs")
    mnt = os.path.join(d, "mnt")
    os.makedirs(mnt)
    passwd = os.path.join(d, "passwd")
    with open(passwd, "w") as f:
        f.write("S3RVER:S3RVER\n")
    os.chmod(passwd, 0o600)
    opts = (f"url={env.endpoint},use_path_request_style,passwd_file={passwd}")
    proc = env.spawn([env.args.s3fs, env.bucket, mnt, "-f", "-o", opts],
                     log=env.log("s3fs.log"))

    def unmount():
        if is_mounted(mnt):
            if subprocess.call(["fusermount", "-u", mnt],
                               stderr=subprocess.DEVNULL) != 0:
                subprocess.call(["umount", "-l", mnt])
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    env.defer(unmount)
    deadline = time.monotonic() + 20
    while not is_mounted(mnt):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"s3fs did not mount; see {env.log('s3fs.log')}")
        time.sleep(0.1)
    env.state["s3fs"] = mnt
    print(f"s3fs: -o {opts.replace(passwd, 'PASSWD')}", file=sys.stderr)
    return mnt


def s3fs_rows(env):
    if not os.access(env.args.s3fs, os.X_OK):
        raise NotYet(f"{env.args.s3fs} missing (apt-get install s3fs)")
    mnt = s3fs_mount(env)
    d = os.path.join(mnt, "s3fs")
    os.makedirs(d, exist_ok=True)
    paths = [os.path.join(d, f"shard-{r}") for r in range(env.ranks)]
    save = env.measure("s3fs", "save", env.save_bytes(), lambda: env.run_ranks(
        [["cp", env.shards[r], paths[r]] for r in range(env.ranks)])[0])

    def restore():
        seconds, outs = env.run_ranks(
            [env.reader([paths[j] for j in env.rotated(r)])
             for r in range(env.ranks)])
        check_reads("s3fs", env, outs)
        return seconds

    return [save, env.measure("s3fs", "restore", env.restore_bytes(), restore)]


def check_reads(tool, env, outs):
    for r, out in enumerate(outs):
        if int(out.strip() or 0) != env.ranks * env.shard_bytes:
            raise RuntimeError(f"{tool} rank {r} read {out.strip()} bytes")


def direct_seed(env):
    """The objects direct reads: PUT straight to s3rver (no front, untimed)."""
    if "direct" in env.state:
        return
    u = env.upstream.split("//", 1)[1]
    host, port = u.split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=300)
    for r in range(env.ranks):
        with open(env.shards[r], "rb") as f:
            c.request("PUT", f"/{env.bucket}/direct/shard-{r}", body=f,
                      headers={"Content-Length": str(env.shard_bytes)})
            resp = c.getresponse()
            resp.read()
            if resp.status != 200:
                raise RuntimeError(f"seeding direct/shard-{r}: {resp.status}")
    c.close()
    env.state["direct"] = True


def direct_rows(env):
    rows = []
    for n in env.args.direct_parallel:
        keys = [f"direct{n}/shard-{r}" for r in range(env.ranks)]

        def save():
            seconds, outs = env.run_ranks(
                [[PYTHON, "-c", DIRECT_PUT, env.endpoint, env.bucket, keys[r],
                  env.shards[r], str(n), str(8 << 20)]
                 for r in range(env.ranks)])
            for r, out in enumerate(outs):
                if int(out.strip() or 0) != env.shard_bytes:
                    raise RuntimeError(f"direct rank {r} uploaded {out.strip()}")
            return seconds

        rows.append(env.measure(f"direct{n}", "save", env.save_bytes(), save))
    direct_seed(env)
    urls = [f"{env.endpoint}/{env.bucket}/direct/shard-{r}"
            for r in range(env.ranks)]

    def restore():
        seconds, outs = env.run_ranks(
            [env.reader([urls[j] for j in env.rotated(r)])
             for r in range(env.ranks)])
        check_reads("direct", env, outs)
        return seconds

    return rows + [env.measure("direct", "restore", env.restore_bytes(),
                               restore)]


LARDER_READER = r"""
import sys, larder
c = larder.Client(sys.argv[1], node=sys.argv[2])
buf = bytearray(8 << 20)
total = 0
for p in sys.argv[3:]:
    with c.open(p) as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            total += n
print(total)
"""


def larder_cluster(env):
    """A Larder cluster of one worker per rank (each its own "node", so a
    rank reads its node's worker by short-circuit and the others over gRPC,
    as ranks on separate machines would), mounted writable at /ckpt on the
    bucket through the front."""
    if "larder" in env.state:
        return env.state["larder"]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.join(repo, "python", "tests"))
    from cluster import Cluster  # noqa: E402
    cli = os.environ.get("LARDER_CLI") or os.path.join(repo, "build", "cli", "larder")
    if not os.access(cli, os.X_OK):
        raise NotYet(f"{cli} missing (scripts/build.sh)")
    os.environ.update({"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER",
                       "LARDER_CLI": cli})
    # Room for every shard in RAM across the workers, twice over.
    ram = max(256, 2 * env.ranks * (env.shard_bytes >> 20) // env.ranks + 256)
    c = Cluster(workers=env.ranks, ram=f"{ram}MiB", allowed_root=env.workdir,
                worker_flags=tuple(f for f in env.args.worker_flags.split(",")
                                   if f))
    for i, w in enumerate(c.workers):
        w.argv.append(f"--node=node-{i}")
    env.defer(c.stop)
    c.start()
    host_port = env.endpoint.split("//", 1)[1]
    c.mount("/ckpt", f"s3://{env.bucket}/larder?endpoint=http://{host_port}"
            "&region=us-east-1&path_style=true", "--writable",
            *([f"--mount_block_size={env.args.ckpt_block_size}"]
              if env.args.ckpt_block_size else []))
    env.state["larder"] = c
    return c


def larder_cp(env, c, local, path, rank):
    # --log_level=info: its write.closed line says where the time went.
    return [c.cli, "cp", local, path, "--overwrite", f"--node=node-{rank}",
            f"--parallel_writes={env.args.parallel_writes}", "--log_level=info"]


def larder_phases(env, what):
    """A note from the ranks' last write.closed log lines: where a save's
    time went (the last parts after the data ended, the commit at the
    master, the publish to the workers)."""
    fields = {"last_parts_ms": [], "commit_ms": [], "publish_ms": []}
    for r in range(env.ranks):
        try:
            with open(env.log(f"rank{r}.err"), errors="replace") as f:
                lines = [x for x in f if "write.closed" in x]
        except OSError:
            continue
        if not lines:
            continue
        for kv in lines[-1].split():
            k, _, v = kv.partition("=")
            if k in fields:
                fields[k].append(float(v))
    if not all(fields.values()):
        return None
    def span(k):
        return f"{min(fields[k]):.0f}-{max(fields[k]):.0f} ms"
    return (f"{what} round {env.round + 1}: each rank's close took: last parts "
            f"{span('last_parts_ms')}, commit {span('commit_ms')}, publish "
            f"{span('publish_ms')}")


def larder_reader(env, c, rank, paths):
    """One rank's reader of `paths`: prints the bytes it read."""
    if env.larder_reader == "python":
        return [PYTHON, "-c", LARDER_READER, c.master, f"node-{rank}"] + paths
    return ["bash", "-c", 'set -o pipefail; cli=$1; node=$2; '
            'shift 2; "$cli" cat "$@" --node="$node" | wc -c', "reader",
            c.cli, f"node-{rank}"] + paths


def larder_rows(env):
    """Save: each rank `larder cp SHARD /ckpt/shard-R` (its node's worker
    first; parts go to every worker, which upload them and keep the blocks).
    Restore: each rank reads every shard with the Python client."""
    c = larder_cluster(env)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    e = dict(os.environ, LARDER_MASTER=c.master,
             PYTHONPATH=os.path.join(repo, "build", "python"))
    paths = [f"/ckpt/shard-{r}" for r in range(env.ranks)]
    workers = [w.proc.pid for w in c.workers]
    cpu = sum(proc_cpu(p) for p in workers)
    save = env.measure("larder", "save", env.save_bytes(), lambda: env.run_ranks(
        [larder_cp(env, c, env.shards[r], paths[r], r)
         for r in range(env.ranks)], env=e)[0])
    cpu = sum(proc_cpu(p) for p in workers) - cpu
    note = larder_phases(env, "larder save")
    if note:
        env.state.setdefault("notes", []).append(
            f"{note}; the workers used {cpu:.1f} CPU-s, "
            f"{cpu / (env.save_bytes() / 1e9):.2f} per GB saved")

    def restore():
        seconds, outs = env.run_ranks(
            [larder_reader(env, c, r, [paths[j] for j in env.rotated(r)])
             for r in range(env.ranks)], env=e)
        check_reads("larder", env, outs)
        return seconds

    return [save, env.measure("larder", "restore", env.restore_bytes(), restore)]


# One dataset reader: loops over the paths (argv[4:]) with the Python client
# until the file argv[3] exists; prints bytes read and seconds.
BUSY_READER = r"""
import os, sys, time, larder
c = larder.Client(sys.argv[1], node=sys.argv[2])
stop, paths = sys.argv[3], sys.argv[4:]
buf = bytearray(1 << 20)
total, t, i = 0, time.monotonic(), 0
while not os.path.exists(stop):
    with c.open(paths[i % len(paths)]) as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            total += n
    i += 1
print(total, time.monotonic() - t)
"""


# The same with `larder cat` of all the paths at a time: argv[1:4] = cli,
# node, stop file.
BUSY_CAT = r"""
import os, subprocess, sys, time
cli, node, stop, paths = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
total, t = 0, time.monotonic()
while not os.path.exists(stop):
    p = subprocess.Popen([cli, "cat", "--node=" + node] + paths,
                         stdout=subprocess.PIPE)
    buf = bytearray(1 << 20)
    while not os.path.exists(stop):
        n = p.stdout.readinto(buf)
        if not n:
            break
        total += n
    p.kill()
    p.wait()
print(total, time.monotonic() - t)
"""


def busy_rows(env):
    """Dataset reads alone, then during a save of every rank's shard."""
    c = larder_cluster(env)
    a = env.args
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    e = dict(os.environ, LARDER_MASTER=c.master,
             PYTHONPATH=os.path.join(repo, "build", "python"))
    if "busy" not in env.state:
        data = os.path.join(env.workdir, "dataset")
        os.makedirs(data, exist_ok=True)
        for i in range(a.busy_files):
            with open(os.path.join(data, f"f{i:05d}"), "wb") as f:
                f.write(os.urandom(1 << 20))
        c.mount("/bench-data", f"file://{data}")
        env.state["busy"] = [f"/bench-data/f{i:05d}" for i in range(a.busy_files)]
    paths = env.state["busy"]
    # Warm: every file read once (a sequential pass per reader's node).
    env.run_ranks([larder_reader(env, c, 0, paths)], env=e)

    def readers(stop):
        procs = []
        for r in range(a.busy_readers):
            order = paths[r * len(paths) // a.busy_readers:] + \
                paths[:r * len(paths) // a.busy_readers]
            cmd = ([PYTHON, "-c", BUSY_READER, c.master] if
                   env.larder_reader == "python" else
                   [PYTHON, "-c", BUSY_CAT, c.cli])
            procs.append(env.spawn(
                cmd + [f"node-{r % env.ranks}", stop] + order,
                stdout=subprocess.PIPE, stderr=open(env.log(f"busy{r}.err"), "ab"),
                env=e, first=True))
        return procs

    def collect(procs):
        total, seconds = 0, 0.0
        for p in procs:
            out, _ = p.communicate(timeout=a.timeout)
            if p.returncode != 0:
                raise RuntimeError(f"a dataset reader exited {p.returncode}")
            b, t = out.split()
            total += int(b)
            seconds = max(seconds, float(t))
        return total, seconds

    def counters():
        return {k: c.metric(f"larder_worker_{k}_total")
                for k in ("hits", "misses", "evictions")}

    def moved(before):
        now = counters()
        return ", ".join(f"{k} {now[k] - before[k]:.0f}" for k in now)

    stop = os.path.join(env.workdir, f"stop-alone-{env.round}")
    workers = [w.proc.pid for w in c.workers]
    alone_counts = counters()
    alone_cpu = sum(proc_cpu(p) for p in workers)
    procs = readers(stop)
    time.sleep(a.busy_seconds)
    open(stop, "w").close()
    alone_cpu = sum(proc_cpu(p) for p in workers) - alone_cpu
    alone_bytes, alone_s = collect(procs)
    alone_counts = moved(alone_counts)
    alone = env.measure("reads", "alone", alone_bytes, lambda: alone_s)

    stop = os.path.join(env.workdir, f"stop-during-{env.round}")
    procs = readers(stop)
    time.sleep(1)  # The readers are reading before the save starts.
    ckpt = [f"/ckpt/busy-{r}" for r in range(env.ranks)]
    # Where the CPU went during the save: the workers, the writers (`larder
    # cp`, children waited for), the readers.
    cpu_workers = sum(proc_cpu(p) for p in workers)
    cpu_readers = sum(proc_cpu(p.pid) for p in procs)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    during_counts = counters()
    if a.busy_save == "direct":
        # The control: the same bytes to the same store from the same cores,
        # with Larder out of the save's way (aws-cli's 10 parts in flight).
        cmds = [[PYTHON, "-c", DIRECT_PUT, env.endpoint, env.bucket,
                 f"busy-direct/shard-{r}", env.shards[r], "10", str(8 << 20)]
                for r in range(env.ranks)]
    else:
        cmds = [larder_cp(env, c, env.shards[r], ckpt[r], r)
                for r in range(env.ranks)]
    try:
        save = env.measure("save", "during", env.save_bytes(),
                           lambda: env.run_ranks(cmds, env=e)[0])
    finally:
        cpu_workers = sum(proc_cpu(p) for p in workers) - cpu_workers
        cpu_readers = sum(proc_cpu(p.pid) for p in procs) - cpu_readers
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_writers = (after.ru_utime + after.ru_stime -
                       children.ru_utime - children.ru_stime)
        open(stop, "w").close()
    during_bytes, during_s = collect(procs)
    during_counts = moved(during_counts)
    during = Row("reads", "during", during_s, during_bytes, save.delta,
                 save.s3rver_cpu)
    env.state.setdefault("busy_notes", []).append(
        f"busy round {env.round + 1}: dataset reads during the "
        f"{'direct ' if a.busy_save == 'direct' else ''}save at "
        f"{during_bytes / during_s / 1e6:.0f} MB/s, alone "
        f"{alone_bytes / alone_s / 1e6:.0f} MB/s: "
        f"{100 * (1 - (during_bytes / during_s) / (alone_bytes / alone_s)):.1f}% slower; "
        f"CPU seconds during the {save.seconds:.1f} s save: readers {cpu_readers:.1f}, "
        f"workers {cpu_workers:.1f}, writers {cpu_writers:.1f}, "
        f"s3rver {save.s3rver_cpu:.1f}, front {save.delta.get('cpu_s', 0):.1f} "
        f"(workers alone: {alone_cpu:.1f} in {alone_s:.1f} s); workers' "
        f"blocks alone: {alone_counts}; during: {during_counts}")
    return [alone, during, save]


RUNNERS = {"aws": aws_rows, "s3fs": s3fs_rows, "direct": direct_rows,
           "larder": larder_rows, "busy": busy_rows}


# ------------------------------------------------------------------ driver --
def start_s3rvers(env):
    """--s3rvers s3rver processes over one directory, on --store_cpus."""
    addrs, env.s3rver_pids = benchlib.start_s3rvers(
        env.spawn, os.path.join(env.workdir, "s3rver-data"), env.args.s3rvers,
        BUCKET, node=env.args.node, preexec_fn=on_store_cpus(env),
        log=lambda i: env.log(f"s3rver{i}.log"))
    env.upstream = f"http://{addrs[0]}"
    return addrs


def on_store_cpus(env):
    """preexec_fn for the store's processes: their own cores, if given."""
    return benchlib.on_cpus(env.args.store_cpus)


def make_shards(env):
    chunk = 8 << 20
    for r in range(env.ranks):
        path = os.path.join(env.workdir, "shards", f"shard-{r}")
        with open(path, "wb") as f:
            left = env.shard_bytes
            while left > 0:
                n = min(chunk, left)
                f.write(os.urandom(n))
                left -= n
        env.shards.append(path)


def print_table(env, rows_by_round, notes):
    a = env.args
    print()
    print(f"Checkpoint save/restore through the shaping front: {a.ranks} ranks x "
          f"{a.shard_mib} MiB shards, first byte {a.first_byte_ms:g} ms, "
          f"{a.rate_mbps:g} MB/s per connection and direction"
          + (f", median of {a.rounds} rounds" if a.rounds > 1 else ""))
    ceiling = a.ranks * a.rate_mbps
    print(f"{a.s3rvers} s3rver process(es) behind the front; at one connection "
          f"per rank the front would carry {a.ranks} x {a.rate_mbps:g} = "
          f"{ceiling:g} MB/s" + ("" if a.rate_mbps else " (unlimited)")
          + "; the direct rows show what it carries with more in flight")
    hdr = (f"{'TOOL':<8} {'PHASE':<8} {'SECONDS':>8} {'MB/s':>8} {'GETs':>6} "
           f"{'PUTs':>6} {'OTHER':>6} {'MB FROM STORE':>14} {'MB TO STORE':>12} "
           f"{'CONNS':>6} {'FRONT CPU s':>11} {'S3RVER CPU s':>12}")
    print(hdr)
    keys = []
    for rows in rows_by_round:
        for r in rows:
            if (r.tool, r.phase) not in keys:
                keys.append((r.tool, r.phase))
    for key in keys:
        rs = [r for rows in rows_by_round for r in rows
              if (r.tool, r.phase) == key]
        secs = statistics.median(r.seconds for r in rs)
        d = rs[0].delta  # Counts of the first round.
        by = d.get("requests_by_method", {})
        gets = d.get("gets", {}).get("object", 0)
        puts = by.get("PUT", 0)
        other = sum(by.values()) - by.get("GET", 0) - puts + d.get(
            "gets", {}).get("listing", 0)
        print(f"{key[0]:<8} {key[1]:<8} {secs:8.2f} {rs[0].nbytes / secs / 1e6:8.1f} "
              f"{gets:6d} {puts:6d} {other:6d} "
              f"{d.get('bytes_upstream_to_client', 0) / 1e6:14.1f} "
              f"{d.get('bytes_client_to_upstream', 0) / 1e6:12.1f} "
              f"{d.get('connections', 0):6d} {d.get('cpu_s', 0):11.2f} "
              f"{rs[0].s3rver_cpu:12.2f}")
    for n in notes:
        print(n)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--shard_mib", type=int, default=64,
                    help="64 for a quick run; the documented run is 512")
    ap.add_argument("--first_byte_ms", type=float, default=25)
    ap.add_argument("--rate_mbps", type=float, default=80)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--tools", default="aws,s3fs,direct,larder,busy")
    ap.add_argument("--s3rvers", type=int, default=1,
                    help="s3rver processes behind the front (one is ~one core)")
    ap.add_argument("--direct_parallel", default="10,32",
                    help="parts in flight per rank of the direct save rows")
    ap.add_argument("--parallel_writes", type=int, default=8,
                    help="larder cp --parallel_writes (parts in flight)")
    ap.add_argument("--larder_reader", choices=("python", "cat"), default=None,
                    help="the restore's reader (default: python where the "
                    "module imports, else larder cat)")
    ap.add_argument("--aws", default="/usr/bin/aws")
    ap.add_argument("--s3fs", default="/usr/bin/s3fs")
    ap.add_argument("--node", default="node", help="the node binary for s3rver")
    ap.add_argument("--store_cpus", default="",
                    help="cores for s3rver and the front, e.g. 8-15")
    ap.add_argument("--node_cpus", default="",
                    help="cores for everything else, e.g. 0-7")
    ap.add_argument("--worker_flags", default="",
                    help="extra `larder worker` flags, comma-separated")
    ap.add_argument("--busy_readers", type=int, default=2)
    ap.add_argument("--busy_files", type=int, default=256)
    ap.add_argument("--ckpt_block_size", default="",
                    help="block size of the /ckpt mount (e.g. 8MiB; default "
                    "the cluster's)")
    ap.add_argument("--busy_seconds", type=float, default=15)
    ap.add_argument("--busy_save", choices=("larder", "direct"), default="larder",
                    help="what saves during the busy rows: `larder cp` per rank, "
                    "or (the control) plain multipart uploads to the same store")
    ap.add_argument("--drop_caches", action="store_true",
                    help="echo 3 > /proc/sys/vm/drop_caches before each restore")
    ap.add_argument("--dir", default=None, help="parent of the work directory")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--timeout", type=float, default=1800,
                    help="seconds a phase may take")
    args = ap.parse_args()
    args.direct_parallel = [int(n) for n in args.direct_parallel.split(",") if n]
    tools = [t for t in args.tools.split(",") if t]
    for t in tools:
        if t not in RUNNERS:
            raise SystemExit(f"--tools: unknown {t}; known: {', '.join(RUNNERS)}")

    benchlib.unwind_on_signals()  # Through the finally below.

    if args.node_cpus:  # Inherited by every process started from here on.
        os.sched_setaffinity(0, parse_cpus(args.node_cpus))
    workdir = tempfile.mkdtemp(prefix="larder-ckptbench.", dir=args.dir)
    for sub in ("logs", "shards", "restore"):
        os.makedirs(os.path.join(workdir, sub))
    env = Env(args, workdir)
    env.larder_reader = args.larder_reader or (
        "python" if subprocess.call(
            [PYTHON, "-c", "import larder"], stderr=subprocess.DEVNULL,
            env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "build", "python")))
        == 0 else "cat")
    status = 0
    try:
        print(f"work directory {workdir}", file=sys.stderr)
        make_shards(env)
        upstreams = start_s3rvers(env)
        env.proxy = ShapingProxy(",".join(upstreams),
                                 first_byte_ms=args.first_byte_ms,
                                 rate_mbps=args.rate_mbps,
                                 stats_file=os.path.join(workdir, "front.json"),
                                 python=PYTHON,
                                 stderr=open(env.log("front.log"), "ab"),
                                 preexec_fn=on_store_cpus(env))
        env.proxy.start()
        env.defer(env.proxy.stop)
        env.endpoint = env.proxy.endpoint
        rows_by_round, notes, skipped = [], [], set()
        for rnd in range(args.rounds):
            env.round = rnd
            rows = []
            for t in tools:
                if t in skipped:
                    continue
                print(f"round {rnd + 1}: {t}...", file=sys.stderr, flush=True)
                try:
                    got = RUNNERS[t](env)
                except NotYet as e:
                    skipped.add(t)
                    notes.append(f"{t}: {e}")
                    continue
                except Exception as e:  # noqa: BLE001 (the other tools go on)
                    skipped.add(t)
                    notes.append(f"{t}: failed: {e}")
                    print(f"  {t} failed: {e}", file=sys.stderr, flush=True)
                    continue
                for r in got:
                    print(f"  {r.tool} {r.phase}: {r.seconds:.2f} s, "
                          f"{r.nbytes / r.seconds / 1e6:.1f} MB/s",
                          file=sys.stderr, flush=True)
                rows += got
            rows_by_round.append(rows)
        print_table(env, rows_by_round, notes + env.state.get("notes", []) +
                    env.state.get("busy_notes", []))
        final = env.proxy.stats()
        if final.get("parse_errors"):
            print(f"front: {final['parse_errors']} streams it could not parse "
                  "(request counts are low)")
    except KeyboardInterrupt:
        print("interrupted: cleaning up", file=sys.stderr)
        status = 130
    finally:
        # Ctrl-C again during the cleanup must not leave a mount behind.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        env.cleanup()
        if args.keep:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
