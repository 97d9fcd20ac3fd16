# deskbox-pyctx: the driver of a stateful Python context, run inside the
# sandbox by deskboxd as `python3 -c <this file>` (embedded in deskboxd).
#
# Protocol, one request at a time:
#   deskboxd -> stdin:  u32 big-endian length, then JSON
#                       {"code": str, "cwd": str|null, "env": {..}, "max_output": int}
#   driver -> stdout:   u32 big-endian length, then JSON
#                       {"exit_code", "result", "out_len", "err_len", "out_total", "err_total"}
#                       followed by out_len bytes of stdout and err_len of stderr.
# The protocol's stdin and stdout are moved to private fds first; fds 0-2
# are /dev/null between requests, and during one, 1 and 2 are temporary
# files, so output of subprocesses the code starts is captured as well.
import ast
import linecache
import os
import struct
import sys
import tempfile
import traceback


def main():
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    env = {"__name__": "__main__", "__builtins__": __builtins__}
    n_run = 0

    def read_exact(n):
        buf = b""
        while len(buf) < n:
            chunk = proto_in.read(n - len(buf))
            if not chunk:
                os._exit(0)
            buf += chunk
        return buf

    import json
    while True:
        (n,) = struct.unpack(">I", read_exact(4))
        req = json.loads(read_exact(n))
        cap = int(req.get("max_output") or (1 << 20))
        out = tempfile.TemporaryFile()
        err = tempfile.TemporaryFile()
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        n_run += 1
        name = "<cell-%d>" % n_run
        code = req.get("code", "")
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        exit_code, result = 0, None
        try:
            if req.get("cwd"):
                os.chdir(req["cwd"])
            os.environ.update(req.get("env") or {})
            tree = ast.parse(code, name, "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, name, "exec"), env)
            if last is not None:
                value = eval(compile(last, name, "eval"), env)
                if value is not None:
                    result = repr(value)
        except SystemExit as e:
            if e.code is None or isinstance(e.code, int):
                exit_code = e.code or 0
            else:
                print(e.code, file=sys.stderr)
                exit_code = 1
        except BaseException:
            etype, value, tb = sys.exc_info()
            # Leave this driver's own frame out of the traceback.
            traceback.print_exception(etype, value, tb.tb_next if tb else None)
            exit_code = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        os.dup2(null, 1)
        os.dup2(null, 2)

        def grab(f):
            total = f.seek(0, 2)
            f.seek(0)
            data = f.read(cap)
            f.close()
            return data, total

        o, ot = grab(out)
        e, et = grab(err)
        head = json.dumps({"exit_code": exit_code, "result": result, "out_len": len(o),
                           "err_len": len(e), "out_total": ot, "err_total": et}).encode()
        proto_out.write(struct.pack(">I", len(head)) + head + o + e)


main()
