#!/usr/bin/python3
# A small WebHDFS server for tests: a stand-in for a real HDFS namenode and
# datanode (no HDFS runs on the test machine). It serves a local directory as
# the HDFS namespace, written from the Apache WebHDFS REST API specification
# (hadoop.apache.org/docs/stable/hadoop-project-dist/hadoop-hdfs/WebHDFS.html):
#
#   GET /webhdfs/v1/PATH?op=GETFILESTATUS   -> {"FileStatus": {...}}
#   GET /webhdfs/v1/PATH?op=LISTSTATUS      -> {"FileStatuses": {"FileStatus": [...]}}
#   GET /webhdfs/v1/PATH?op=LISTSTATUS_BATCH[&startAfter=NAME]
#        -> {"DirectoryListing": {"partialListing": {"FileStatuses": ...},
#                                 "remainingEntries": N}}
#   GET /webhdfs/v1/PATH?op=OPEN[&offset=N][&length=N]
#        -> namenode: 307 Temporary Redirect, Location: the datanode port;
#           datanode: 200 with the bytes
#   PUT /webhdfs/v1/PATH?op=CREATE[&overwrite=true|false][&permission=OCTAL]
#        -> namenode: 307 Temporary Redirect, Location: the datanode port
#           (nothing is created yet; the request carries no data);
#           datanode: the PUT's body becomes the file (missing parent
#           directories are made), 201 Created, Location: webhdfs://HOST:PORT/PATH
#   POST /webhdfs/v1/PATH?op=CONCAT&sources=P1,P2,...
#        -> 200, no content: the sources (absolute paths of non-empty files
#           in PATH's directory, none of them PATH, no repeats) are appended
#           to PATH in order and removed
#   PUT /webhdfs/v1/PATH?op=RENAME&destination=P
#        -> 200 {"boolean": B}: FileSystem.rename's rules: false when PATH
#           does not exist, P's parent does not exist or P is an existing
#           file; an existing directory P receives PATH inside it
#   DELETE /webhdfs/v1/PATH?op=DELETE[&recursive=true|false]
#        -> 200 {"boolean": B}: false when PATH does not exist; a non-empty
#           directory without recursive=true is an IOException (403)
#
# Errors are RemoteException JSON bodies with the status codes the
# specification lists (404 FileNotFoundException, 403 AccessControlException
# and other IOExceptions, 401 SecurityException, 400 IllegalArgumentException
# and UnsupportedOperationException). An op sent with the wrong HTTP method
# is 400, as the namenode answers it.
#
# Authentication: with --user, requests must carry user.name=USER (simple
# auth) or delegation=TOKEN (with --token); anything else is 401, and
# --deny PREFIX answers 403 for paths below PREFIX.
#
# Misbehaviours, for the tests of what a client does with a namenode that is
# broken or hostile:
#   --open-redirect URL   OPEN answers 307 with Location: URL (verbatim),
#                         instead of the datanode's address
#   --list-fault repeat   LISTSTATUS_BATCH ignores startAfter: always the
#                         first batch, with remainingEntries > 0
#   --list-fault empty    after the first batch, LISTSTATUS_BATCH answers no
#                         entries but remainingEntries > 0
#   --list-fault endless  LISTSTATUS_BATCH always brings one new file after
#                         startAfter (f000000000, f000000001, ...) and
#                         remainingEntries 1: a listing that never ends
#   --old-namenode        no LISTSTATUS_BATCH: answered as Hadoop before 2.8
#                         answers an op it does not know (400
#                         IllegalArgumentException, "No enum constant ...")
#   --standby N           the first N namenode requests are answered 403
#                         StandbyException, as a standby namenode answers
#
# Children are listed in the namenode's order: names compared as signed
# bytes (DFSUtilClient.compareBytes), so UTF-8 names sort before ASCII ones;
# startAfter follows the same order.
#
#   webhdfs_server.py --root DIR --port P --datanode-port Q [--user U]
#                     [--token T] [--batch 1000] [--deny /secret]
#                     [--host 127.0.0.1] [--open-redirect URL]
#                     [--list-fault repeat|empty|endless] [--old-namenode]
#                     [--standby N]
#
# --host is the IPv4 address both ports listen on and the datanode redirect
# names (default 127.0.0.1).
#
# It prints "webhdfs: namenode PORT datanode PORT" when both listen and logs
# one line per request on stderr.
import argparse
import json
import os
import shutil
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
STANDBY_LEFT = [0]
STANDBY_LOCK = threading.Lock()


def hdfs_order(name):
    """The namenode's sort key of a child's name: its bytes, signed."""
    return [b - 256 if b > 127 else b for b in name.encode()]


def file_status(path, name):
    st = os.stat(path)
    is_dir = os.path.isdir(path)
    return {
        "accessTime": int(st.st_atime * 1000),
        "blockSize": 134217728,
        "childrenNum": len(os.listdir(path)) if is_dir else 0,
        "fileId": st.st_ino,
        "group": "supergroup",
        "length": 0 if is_dir else st.st_size,
        "modificationTime": int(st.st_mtime_ns // 1000000),
        "owner": "hdfs",
        "pathSuffix": name,
        "permission": "755" if is_dir else "644",
        "replication": 0 if is_dir else 3,
        "storagePolicy": 0,
        "type": "DIRECTORY" if is_dir else "FILE",
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    datanode = False
    # Headers and body go out in two writes; with Nagle on, the body waits
    # for the client's delayed ACK (40 ms per request on Linux).
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % ("datanode" if self.datanode else "namenode",
                                      fmt % args))

    def reply(self, code, body=b"", ctype="application/json", headers=()):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, code, exception, message):
        java = {
            "FileNotFoundException": "java.io.FileNotFoundException",
            "AccessControlException":
                "org.apache.hadoop.security.AccessControlException",
            "SecurityException": "java.lang.SecurityException",
            "IllegalArgumentException": "java.lang.IllegalArgumentException",
            "HadoopIllegalArgumentException":
                "org.apache.hadoop.HadoopIllegalArgumentException",
            "UnsupportedOperationException":
                "java.lang.UnsupportedOperationException",
            "FileAlreadyExistsException":
                "org.apache.hadoop.fs.FileAlreadyExistsException",
            "PathIsNotEmptyDirectoryException":
                "org.apache.hadoop.fs.PathIsNotEmptyDirectoryException",
            "IOException": "java.io.IOException",
            "StandbyException": "org.apache.hadoop.ipc.StandbyException",
        }[exception]
        self.reply(code, {"RemoteException": {
            "exception": exception, "javaClassName": java, "message": message}})

    # The ops of each HTTP method (GetOpParam, PutOpParam, PostOpParam and
    # DeleteOpParam in Hadoop), of those this stand-in serves.
    OPS = {
        "GET": ("GETFILESTATUS", "LISTSTATUS", "LISTSTATUS_BATCH", "OPEN"),
        "PUT": ("CREATE", "RENAME"),
        "POST": ("CONCAT",),
        "DELETE": ("DELETE",),
    }

    def do_GET(self):
        self.dispatch()

    def do_PUT(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def do_DELETE(self):
        self.dispatch()

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        data = b""
        while len(data) < n:
            chunk = self.rfile.read(n - len(data))
            if not chunk:
                break
            data += chunk
        return data

    def dispatch(self):
        # The body is read whatever the answer, so that the connection stays
        # usable for the next request.
        body = self.read_body() if self.command in ("PUT", "POST") else b""
        url = urllib.parse.urlsplit(self.path)
        if not url.path.startswith("/webhdfs/v1"):
            return self.error(404, "FileNotFoundException",
                              "no such resource: " + url.path)
        hdfs_path = urllib.parse.unquote(url.path[len("/webhdfs/v1"):]) or "/"
        q = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        op = q.get("op", "").upper()
        known = [m for m, ops in self.OPS.items() if op in ops]
        if known and self.command not in known:
            return self.error(400, "IllegalArgumentException",
                              "Invalid value for webhdfs parameter \"op\": "
                              "No enum constant %s for %s" % (op, self.command))
        if not self.datanode:
            with STANDBY_LOCK:
                standby = STANDBY_LEFT[0] > 0
                if standby:
                    STANDBY_LEFT[0] -= 1
            if standby:
                return self.error(403, "StandbyException",
                                  "Operation category READ is not supported "
                                  "in state standby")
        if ARGS.old_namenode and op == "LISTSTATUS_BATCH":
            return self.error(400, "IllegalArgumentException",
                              "Invalid value for webhdfs parameter \"op\": "
                              "No enum constant org.apache.hadoop.hdfs.web."
                              "resources.GetOpParam.Op.LISTSTATUS_BATCH")
        if ARGS.user is not None:
            ok = q.get("user.name") == ARGS.user or (
                ARGS.token is not None and q.get("delegation") == ARGS.token)
            if not ok:
                return self.error(401, "SecurityException",
                                  "Failed to obtain user group information: "
                                  "authentication required")
        parts = [p for p in hdfs_path.split("/") if p]
        if any(p in (".", "..") for p in parts):
            return self.error(400, "IllegalArgumentException",
                              "Invalid path name " + hdfs_path)
        access = "READ" if self.command == "GET" else "WRITE"
        for deny in ARGS.deny:
            if ("/" + "/".join(parts) + "/").startswith(deny.rstrip("/") + "/"):
                return self.error(403, "AccessControlException",
                                  "Permission denied: user=%s, access=%s, "
                                  "inode=\"%s\"" % (q.get("user.name"), access,
                                                     hdfs_path))
        local = os.path.join(ARGS.root, *parts)
        if self.datanode:
            if op == "CREATE":
                return self.create(local, hdfs_path, q, body)
            if op != "OPEN":
                return self.error(400, "IllegalArgumentException",
                                  "datanode serves only OPEN and CREATE")
        if op == "CREATE":
            # Step 1 of 2: the namenode checks and redirects; the data goes
            # to the datanode.
            err = self.create_check(local, hdfs_path, q)
            if err:
                return err()
            location = "http://%s:%d%s" % (ARGS.host, ARGS.datanode_port,
                                           self.path)
            return self.reply(307, b"", headers=[("Location", location)])
        if op == "DELETE":
            return self.delete(local, hdfs_path, q)
        if not os.path.exists(local):
            return self.error(404, "FileNotFoundException",
                              "File does not exist: " + hdfs_path)
        if self.datanode:
            return self.open(local, q)
        if op == "CONCAT":
            return self.concat(local, hdfs_path, q)
        if op == "RENAME":
            return self.rename(local, hdfs_path, q)
        if op == "GETFILESTATUS":
            return self.reply(200, {"FileStatus": file_status(local, "")})
        if op == "LISTSTATUS_BATCH" and ARGS.list_fault == "endless":
            after = q.get("startAfter", "")
            n = int(after[1:]) + 1 if after[1:].isdigit() else 0
            entry = {"accessTime": 0, "blockSize": 134217728, "childrenNum": 0,
                     "fileId": 1000 + n, "group": "supergroup", "length": 1,
                     "modificationTime": 1700000000000, "owner": "hdfs",
                     "pathSuffix": "f%09d" % n, "permission": "644",
                     "replication": 3, "storagePolicy": 0, "type": "FILE"}
            return self.reply(200, {"DirectoryListing": {
                "partialListing": {"FileStatuses": {"FileStatus": [entry]}},
                "remainingEntries": 1}})
        if op in ("LISTSTATUS", "LISTSTATUS_BATCH"):
            if not os.path.isdir(local):
                entries = [file_status(local, "")]
            else:
                names = sorted(os.listdir(local), key=hdfs_order)
                if (op == "LISTSTATUS_BATCH" and "startAfter" in q and
                        ARGS.list_fault != "repeat"):
                    names = [n for n in names
                             if hdfs_order(n) > hdfs_order(q["startAfter"])]
                entries = []
                for n in names:
                    try:
                        entries.append(file_status(os.path.join(local, n), n))
                    except FileNotFoundError:
                        pass
            if op == "LISTSTATUS":
                return self.reply(200, {"FileStatuses": {"FileStatus": entries}})
            page = entries[:ARGS.batch]
            remaining = len(entries) - len(page)
            if ARGS.list_fault == "empty" and "startAfter" in q:
                page, remaining = [], max(remaining, 1)
            return self.reply(200, {"DirectoryListing": {
                "partialListing": {"FileStatuses": {"FileStatus": page}},
                "remainingEntries": remaining}})
        if op == "OPEN":
            if os.path.isdir(local):
                return self.error(404, "FileNotFoundException",
                                  "Path is not a file: " + hdfs_path)
            location = ARGS.open_redirect or "http://%s:%d%s" % (
                ARGS.host, ARGS.datanode_port, self.path)
            return self.reply(307, b"", headers=[("Location", location)])
        return self.error(400, "UnsupportedOperationException",
                          "op=%s is not supported by this stand-in" % op)

    def local_of(self, hdfs_path):
        """The local path of an absolute HDFS path, or None if it is not one."""
        if not hdfs_path.startswith("/"):
            return None
        parts = [p for p in hdfs_path.split("/") if p]
        if any(p in (".", "..") for p in parts):
            return None
        return os.path.join(ARGS.root, *parts)

    def create_check(self, local, hdfs_path, q):
        """None if CREATE may write `local`, else a function answering why."""
        overwrite = q.get("overwrite", "false").lower()
        if overwrite not in ("true", "false"):
            return lambda: self.error(400, "IllegalArgumentException",
                                      "Invalid value for webhdfs parameter "
                                      "\"overwrite\": " + overwrite)
        if os.path.isdir(local):
            return lambda: self.error(403, "FileAlreadyExistsException",
                                      hdfs_path + " already exists as a directory")
        if os.path.exists(local) and overwrite != "true":
            return lambda: self.error(403, "FileAlreadyExistsException",
                                      hdfs_path + " for client already exists")
        parent = os.path.dirname(local)
        while parent != ARGS.root.rstrip("/") and not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):
            return lambda: self.error(403, "IOException",
                                      "Parent path is not a directory: " +
                                      hdfs_path)
        return None

    def create(self, local, hdfs_path, q, body):
        """Step 2 of CREATE, on the datanode: the body becomes the file."""
        err = self.create_check(local, hdfs_path, q)
        if err:
            return err()
        os.makedirs(os.path.dirname(local), exist_ok=True)
        tmp = "%s.__creating.%d" % (local, threading.get_ident())
        with open(tmp, "wb") as f:
            f.write(body)
        os.replace(tmp, local)
        return self.reply(201, b"", headers=[
            ("Location", "webhdfs://%s:%d%s" % (ARGS.host, ARGS.port,
                                                 hdfs_path))])

    def concat(self, local, hdfs_path, q):
        # FSDirConcatOp's checks: the target and every source exist as files,
        # the sources are in the target's directory, are not the target, are
        # not repeated and are not empty.
        if not os.path.isfile(local):
            return self.error(400, "HadoopIllegalArgumentException",
                              "concat: target file %s is not a file" % hdfs_path)
        names = [p for p in q.get("sources", "").split(",") if p]
        if not names:
            return self.error(400, "HadoopIllegalArgumentException",
                              "concat: no sources given")
        if len(set(names)) != len(names):
            return self.error(400, "HadoopIllegalArgumentException",
                              "concat: repeated sources")
        sources = []
        for name in names:
            src = self.local_of(name)
            if src is None:
                return self.error(400, "IllegalArgumentException",
                                  "Invalid path name " + name)
            if not os.path.exists(src):
                return self.error(404, "FileNotFoundException",
                                  "File does not exist: " + name)
            if src == local:
                return self.error(400, "HadoopIllegalArgumentException",
                                  "concat: the src file %s is the same with "
                                  "the target file %s" % (name, hdfs_path))
            if os.path.dirname(src) != os.path.dirname(local):
                return self.error(400, "HadoopIllegalArgumentException",
                                  "concat: source %s is not in the directory "
                                  "of the target %s" % (name, hdfs_path))
            if not os.path.isfile(src) or os.path.getsize(src) == 0:
                return self.error(400, "HadoopIllegalArgumentException",
                                  "concat: source file %s is invalid or empty "
                                  "or underConstruction" % name)
            sources.append(src)
        with open(local, "ab") as out:
            for src in sources:
                with open(src, "rb") as f:
                    shutil.copyfileobj(f, out, 1 << 20)
        for src in sources:
            os.unlink(src)
        return self.reply(200, b"", ctype="application/octet-stream")

    def rename(self, local, hdfs_path, q):
        dest = q.get("destination", "")
        target = self.local_of(dest)
        if target is None:
            return self.error(400, "IllegalArgumentException",
                              "Invalid value for webhdfs parameter "
                              "\"destination\": " + dest)
        if os.path.isdir(target):
            # FileSystem.rename: into an existing directory.
            target = os.path.join(target, os.path.basename(local))
        ok = (os.path.exists(local) and not os.path.exists(target) and
              os.path.isdir(os.path.dirname(target)) and
              not (target + "/").startswith(local + "/"))
        if ok:
            os.rename(local, target)
        return self.reply(200, {"boolean": ok})

    def delete(self, local, hdfs_path, q):
        recursive = q.get("recursive", "false").lower() == "true"
        if local.rstrip("/") == ARGS.root.rstrip("/"):
            return self.reply(200, {"boolean": False})  # Never the root.
        if not os.path.lexists(local):
            return self.reply(200, {"boolean": False})
        if os.path.isdir(local):
            if os.listdir(local) and not recursive:
                return self.error(403, "PathIsNotEmptyDirectoryException",
                                  "`%s is non empty': Directory is not empty"
                                  % hdfs_path)
            shutil.rmtree(local)
        else:
            os.unlink(local)
        return self.reply(200, {"boolean": True})

    def open(self, local, q):
        size = os.path.getsize(local)
        try:
            offset = int(q.get("offset", "0"))
            length = int(q["length"]) if "length" in q else None
        except ValueError:
            return self.error(400, "IllegalArgumentException", "bad offset/length")
        if offset < 0 or offset > size:
            return self.error(400, "IllegalArgumentException",
                              "Offset=%d out of the range [0, %d)" % (offset, size))
        end = size if length is None else min(size, offset + length)
        with open(local, "rb") as f:
            f.seek(offset)
            data = f.read(end - offset)
        self.reply(200, data, ctype="application/octet-stream")


class DataNodeHandler(Handler):
    datanode = True


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--datanode-port", type=int, required=True)
    p.add_argument("--user")
    p.add_argument("--token")
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--deny", action="append", default=[])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--open-redirect")
    p.add_argument("--list-fault", choices=["repeat", "empty", "endless"])
    p.add_argument("--old-namenode", action="store_true")
    p.add_argument("--standby", type=int, default=0)
    ARGS = p.parse_args()
    STANDBY_LEFT[0] = ARGS.standby
    namenode = ThreadingHTTPServer((ARGS.host, ARGS.port), Handler)
    datanode = ThreadingHTTPServer((ARGS.host, ARGS.datanode_port),
                                   DataNodeHandler)
    namenode.daemon_threads = datanode.daemon_threads = True
    threading.Thread(target=datanode.serve_forever, daemon=True).start()
    print("webhdfs: namenode %d datanode %d" % (ARGS.port, ARGS.datanode_port),
          flush=True)
    namenode.serve_forever()


if __name__ == "__main__":
    main()
