// The WASI (preview 1) calls that wgml's C makes, for the browser: arguments and environment,
// clocks, random bytes, stdout/stderr to a callback, and files in an in-memory store (a Map from
// absolute path to bytes) preopened as "/". Files are put there before a run (from fetch or a
// File) and read back after it (an adapter, a checkpoint). A sleep suspends the wasm stack
// (JavaScript Promise Integration) instead of blocking the worker.

const E = { SUCCESS: 0, BADF: 8, EXIST: 20, INVAL: 28, ISDIR: 31, NOENT: 44, NOSYS: 52, NOTDIR: 54, NOTEMPTY: 55, SPIPE: 70 };
const FILETYPE = { CHAR: 2, DIR: 3, FILE: 4 };
const O_CREAT = 1, O_DIRECTORY = 2, O_EXCL = 4, O_TRUNC = 8;
const FD_APPEND = 1;

export class ProcExit extends Error {
  constructor(code) { super(`exit ${code}`); this.code = code; }
}

export class MemFS {
  constructor() { this.files = new Map(); }
  norm(path) {
    const out = [];
    for (const part of path.split("/")) {
      if (!part || part === ".") continue;
      if (part === "..") out.pop(); else out.push(part);
    }
    return "/" + out.join("/");
  }
  put(path, bytes) { this.files.set(this.norm(path), { data: new Uint8Array(bytes), size: bytes.byteLength ?? bytes.length }); }
  get(path) { const f = this.files.get(this.norm(path)); return f ? f.data.subarray(0, f.size) : undefined; }
  isDir(path) {
    const p = this.norm(path);
    if (p === "/") return true;
    for (const k of this.files.keys()) if (k.startsWith(p + "/")) return true;
    return this.dirs && this.dirs.has(p);
  }
  mkdir(path) { (this.dirs ||= new Set()).add(this.norm(path)); }
  // The entries directly under a folder, [name, FILETYPE] sorted by name: the files' paths and
  // the made folders imply them.
  children(path) {
    const p = this.norm(path), pre = p === "/" ? "/" : p + "/", out = new Map();
    const add = (k, leaf) => {
      if (!k.startsWith(pre) || k === p) return;
      const rest = k.slice(pre.length), i = rest.indexOf("/");
      out.set(i < 0 ? rest : rest.slice(0, i), i < 0 ? leaf : FILETYPE.DIR);
    };
    for (const k of this.files.keys()) add(k, FILETYPE.FILE);
    for (const d of this.dirs || []) add(d, FILETYPE.DIR);
    return [...out].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  }
}

export class WASI {
  // args: argv; env: {name: value}; fs: a MemFS; write(fd, text): stdout (1) and stderr (2).
  constructor({ args = [], env = {}, fs = new MemFS(), write = () => {} }) {
    this.args = args;
    this.env = Object.entries(env).map(([k, v]) => `${k}=${v}`);
    this.fs = fs;
    this.write = write;
    this.fds = [null, null, null, { dir: "/", preopen: "/" }];
    this.decoders = [null, new TextDecoder(), new TextDecoder()];
    this.exports = null;
  }
  bind(exports) { this.exports = exports; }
  get dv() { return new DataView(this.exports.memory.buffer); }
  get u8() { return new Uint8Array(this.exports.memory.buffer); }
  str(p, n) { return new TextDecoder().decode(this.u8.subarray(p, p + n)); }
  strings(list, ptrs, buf) {
    const enc = new TextEncoder();
    for (const s of list) {
      const b = enc.encode(s);
      this.dv.setUint32(ptrs, buf, true);
      ptrs += 4;
      this.u8.set(b, buf);
      this.u8[buf + b.length] = 0;
      buf += b.length + 1;
    }
    return E.SUCCESS;
  }
  sizes(list, count, size) {
    this.dv.setUint32(count, list.length, true);
    this.dv.setUint32(size, list.reduce((n, s) => n + new TextEncoder().encode(s).length + 1, 0), true);
    return E.SUCCESS;
  }
  iovs(iovs, n) {
    const out = [];
    for (let i = 0; i < n; i++) out.push([this.dv.getUint32(iovs + 8 * i, true), this.dv.getUint32(iovs + 8 * i + 4, true)]);
    return out;
  }
  file(fd) { const f = this.fds[fd]; return f && f.path !== undefined ? f : null; }
  entry(f) { return this.fs.files.get(f.path); }
  grow(e, size) {
    if (size <= e.data.length) return;
    const d = new Uint8Array(Math.max(size, e.data.length * 2));
    d.set(e.data.subarray(0, e.size));
    e.data = d;
  }
  readAt(f, iovs, n, pos) {
    const e = this.entry(f);
    let total = 0;
    for (const [p, len] of this.iovs(iovs, n)) {
      const k = Math.max(0, Math.min(len, e.size - pos));
      this.u8.set(e.data.subarray(pos, pos + k), p);
      pos += k;
      total += k;
      if (k < len) break;
    }
    return total;
  }
  writeAt(f, iovs, n, pos) {
    const e = this.entry(f);
    let total = 0;
    for (const [p, len] of this.iovs(iovs, n)) {
      this.grow(e, pos + len);
      e.data.set(this.u8.subarray(p, p + len), pos);
      pos += len;
      total += len;
      e.size = Math.max(e.size, pos);
    }
    return total;
  }
  resolve(dirfd, p, n) {
    const d = this.fds[dirfd];
    if (!d || d.dir === undefined) return null;
    const rel = this.str(p, n);
    return this.fs.norm(rel.startsWith("/") ? rel : d.dir + "/" + rel);
  }
  filestat(buf, type, size) {
    const dv = this.dv;
    for (let i = 0; i < 64; i += 8) dv.setBigUint64(buf + i, 0n, true);
    dv.setUint8(buf + 16, type);
    dv.setBigUint64(buf + 24, 1n, true);
    dv.setBigUint64(buf + 32, BigInt(size), true);
    return E.SUCCESS;
  }

  imports() {
    const w = this;
    const nowNs = () => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));
    return {
      args_get: (a, b) => w.strings(w.args, a, b),
      args_sizes_get: (c, s) => w.sizes(w.args, c, s),
      environ_get: (a, b) => w.strings(w.env, a, b),
      environ_sizes_get: (c, s) => w.sizes(w.env, c, s),
      clock_res_get: (id, p) => { w.dv.setBigUint64(p, 1000n, true); return E.SUCCESS; },
      clock_time_get: (id, prec, p) => {
        w.dv.setBigUint64(p, id === 0 ? nowNs() : BigInt(Math.round(performance.now() * 1e6)), true);
        return E.SUCCESS;
      },
      random_get: (p, n) => {
        for (let i = 0; i < n; i += 65536) crypto.getRandomValues(w.u8.subarray(p + i, p + Math.min(n, i + 65536)));
        return E.SUCCESS;
      },
      proc_exit: (code) => { throw new ProcExit(code); },
      sched_yield: () => E.SUCCESS,
      // only clock subscriptions (a sleep): the wasm stack waits on a timer
      poll_oneoff: new WebAssembly.Suspending(async (inp, out, n, nout) => {
        let ns = 0n;
        for (let i = 0; i < n; i++) {
          const s = inp + 48 * i;
          if (w.dv.getUint8(s + 8) === 0) { const t = w.dv.getBigUint64(s + 24, true); if (t > ns) ns = t; }
        }
        await new Promise((r) => setTimeout(r, Number(ns / 1000000n)));
        for (let i = 0; i < n; i++) {
          const o = out + 32 * i;
          w.dv.setBigUint64(o, w.dv.getBigUint64(inp + 48 * i, true), true);
          w.dv.setUint16(o + 8, 0, true);
          w.dv.setUint8(o + 10, w.dv.getUint8(inp + 48 * i + 8));
        }
        w.dv.setUint32(nout, n, true);
        return E.SUCCESS;
      }),
      fd_write: (fd, iovs, n, nw) => {
        if (fd === 1 || fd === 2) {
          let total = 0;
          for (const [p, len] of w.iovs(iovs, n)) {
            w.write(fd, w.decoders[fd].decode(w.u8.subarray(p, p + len), { stream: true }));
            total += len;
          }
          w.dv.setUint32(nw, total, true);
          return E.SUCCESS;
        }
        const f = w.file(fd);
        if (!f) return E.BADF;
        if (f.flags & FD_APPEND) f.pos = w.entry(f).size;
        const k = w.writeAt(f, iovs, n, f.pos);
        f.pos += k;
        w.dv.setUint32(nw, k, true);
        return E.SUCCESS;
      },
      fd_pwrite: (fd, iovs, n, off, nw) => {
        const f = w.file(fd);
        if (!f) return E.BADF;
        w.dv.setUint32(nw, w.writeAt(f, iovs, n, Number(off)), true);
        return E.SUCCESS;
      },
      fd_read: (fd, iovs, n, nr) => {
        if (fd === 0) { w.dv.setUint32(nr, 0, true); return E.SUCCESS; }
        const f = w.file(fd);
        if (!f) return E.BADF;
        const k = w.readAt(f, iovs, n, f.pos);
        f.pos += k;
        w.dv.setUint32(nr, k, true);
        return E.SUCCESS;
      },
      fd_pread: (fd, iovs, n, off, nr) => {
        const f = w.file(fd);
        if (!f) return E.BADF;
        w.dv.setUint32(nr, w.readAt(f, iovs, n, Number(off)), true);
        return E.SUCCESS;
      },
      fd_seek: (fd, off, whence, out) => {
        const f = w.file(fd);
        if (!f) return fd <= 2 ? E.SPIPE : E.BADF;
        const base = whence === 0 ? 0 : whence === 1 ? f.pos : w.entry(f).size;
        const pos = base + Number(off);
        if (pos < 0) return E.INVAL;
        f.pos = pos;
        w.dv.setBigUint64(out, BigInt(pos), true);
        return E.SUCCESS;
      },
      fd_tell: (fd, out) => { const f = w.file(fd); if (!f) return E.BADF; w.dv.setBigUint64(out, BigInt(f.pos), true); return E.SUCCESS; },
      fd_close: (fd) => { if (fd <= 3 || !w.fds[fd]) return E.BADF; w.fds[fd] = null; return E.SUCCESS; },
      fd_sync: () => E.SUCCESS,
      fd_datasync: () => E.SUCCESS,
      fd_advise: () => E.SUCCESS,
      fd_fdstat_get: (fd, p) => {
        const f = w.fds[fd];
        if (fd > 2 && !f) return E.BADF;
        const dv = w.dv;
        dv.setUint8(p, fd <= 2 ? FILETYPE.CHAR : f.dir !== undefined ? FILETYPE.DIR : FILETYPE.FILE);
        dv.setUint16(p + 2, f && f.flags ? f.flags : 0, true);
        dv.setBigUint64(p + 8, 0xffffffffn, true);
        dv.setBigUint64(p + 16, 0xffffffffn, true);
        return E.SUCCESS;
      },
      fd_fdstat_set_flags: () => E.SUCCESS,
      fd_filestat_get: (fd, p) => {
        const f = w.fds[fd];
        if (fd <= 2) return w.filestat(p, FILETYPE.CHAR, 0);
        if (!f) return E.BADF;
        return f.dir !== undefined ? w.filestat(p, FILETYPE.DIR, 0) : w.filestat(p, FILETYPE.FILE, w.entry(f).size);
      },
      fd_filestat_set_size: (fd, size) => {
        const f = w.file(fd);
        if (!f) return E.BADF;
        const e = w.entry(f);
        w.grow(e, Number(size));
        e.data.fill(0, Math.min(e.size, Number(size)), Number(size));
        e.size = Number(size);
        return E.SUCCESS;
      },
      fd_prestat_get: (fd, p) => {
        const f = w.fds[fd];
        if (!f || !f.preopen) return E.BADF;
        w.dv.setUint8(p, 0);
        w.dv.setUint32(p + 4, new TextEncoder().encode(f.preopen).length, true);
        return E.SUCCESS;
      },
      fd_prestat_dir_name: (fd, p, n) => {
        const f = w.fds[fd];
        if (!f || !f.preopen) return E.BADF;
        w.u8.set(new TextEncoder().encode(f.preopen).subarray(0, n), p);
        return E.SUCCESS;
      },
      // WASI dirents: next cookie u64, inode u64, name length u32, type u8, padding to 24 bytes,
      // then the name; the cookie is an index into children(). A record that does not fit is
      // cut at the buffer's end (the caller then asks again with a larger buffer).
      fd_readdir: (fd, buf, len, cookie, used) => {
        const f = w.fds[fd];
        if (!f) return E.BADF;
        if (f.dir === undefined) return E.NOTDIR;
        const list = w.fs.children(f.dir), enc = new TextEncoder();
        let off = 0;
        for (let i = Number(cookie); i < list.length && off < len; i++) {
          const name = enc.encode(list[i][0]), rec = new Uint8Array(24 + name.length), dv = new DataView(rec.buffer);
          dv.setBigUint64(0, BigInt(i + 1), true);
          dv.setBigUint64(8, BigInt(i + 1), true);
          dv.setUint32(16, name.length, true);
          dv.setUint8(20, list[i][1]);
          rec.set(name, 24);
          const n = Math.min(rec.length, len - off);
          w.u8.set(rec.subarray(0, n), buf + off);
          off += n;
        }
        w.dv.setUint32(used, off, true);
        return E.SUCCESS;
      },
      path_open: (dirfd, dflags, p, n, oflags, rb, ri, fdflags, out) => {
        const path = w.resolve(dirfd, p, n);
        if (path === null) return E.BADF;
        const exists = w.fs.files.has(path);
        if (w.fs.isDir(path) && !exists) {
          if (oflags & (O_CREAT | O_TRUNC)) return E.ISDIR;
          w.fds.push({ dir: path });
        } else {
          if (oflags & O_DIRECTORY) return exists ? E.NOTDIR : E.NOENT;
          if (!exists && !(oflags & O_CREAT)) return E.NOENT;
          if (exists && (oflags & O_EXCL)) return E.EXIST;
          if (!exists || (oflags & O_TRUNC)) w.fs.files.set(path, { data: new Uint8Array(0), size: 0 });
          w.fds.push({ path, pos: 0, flags: fdflags });
        }
        w.dv.setUint32(out, w.fds.length - 1, true);
        return E.SUCCESS;
      },
      path_filestat_get: (dirfd, flags, p, n, out) => {
        const path = w.resolve(dirfd, p, n);
        if (path === null) return E.BADF;
        const e = w.fs.files.get(path);
        if (e) return w.filestat(out, FILETYPE.FILE, e.size);
        return w.fs.isDir(path) ? w.filestat(out, FILETYPE.DIR, 0) : E.NOENT;
      },
      path_create_directory: (dirfd, p, n) => {
        const path = w.resolve(dirfd, p, n);
        if (path === null) return E.BADF;
        if (w.fs.files.has(path) || w.fs.isDir(path)) return E.EXIST;
        w.fs.mkdir(path);
        return E.SUCCESS;
      },
      path_unlink_file: (dirfd, p, n) => {
        const path = w.resolve(dirfd, p, n);
        return path !== null && w.fs.files.delete(path) ? E.SUCCESS : E.NOENT;
      },
      path_remove_directory: (dirfd, p, n) => {
        const path = w.resolve(dirfd, p, n);
        if (path === null) return E.BADF;
        if (w.fs.files.has(path)) return E.NOTDIR;
        if (!w.fs.isDir(path) || path === "/") return path === "/" ? E.INVAL : E.NOENT;
        if (w.fs.children(path).length) return E.NOTEMPTY;
        w.fs.dirs?.delete(path);
        return E.SUCCESS;
      },
      path_rename: (fd1, p1, n1, fd2, p2, n2) => {
        const a = w.resolve(fd1, p1, n1), b = w.resolve(fd2, p2, n2);
        const e = a !== null && w.fs.files.get(a);
        if (!e) return E.NOENT;
        w.fs.files.delete(a);
        w.fs.files.set(b, e);
        return E.SUCCESS;
      },
    };
  }
}
