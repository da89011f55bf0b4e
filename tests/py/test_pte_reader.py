# venv: pt
"""The ExecuTorch program reader (src/io/pte.c, pte_vk.c) against ExecuTorch's own Python
deserialisation of programs made by the real exporter.

Small modules (tests/et/programs.py READER_CASES) exported with torch.export ->
to_edge_transform_and_lower (VulkanPartitioner, the WebGPU partitioner, or none) -> to_executorch,
taken from the committed fixture (tests/et/fixture.py). Each file is dumped by `tool_pte dump` (JSON) and compared, field by field,
with executorch.exir._serialize (the Program flatbuffer read through ExecuTorch's schema, the
segments restored by deserialize_pte_binary) and, for each VulkanBackend blob, with
executorch.backends.vulkan.serialization (VH00 header and the VkGraph through flatc): values,
operators and their args, tensor sizes/dtypes, instructions, delegates, constant sizes and
their bytes (FNV-1a hashes of the bytes each side resolves).

Then the bad-file half: corrupted forms of the exported programs (made with flatc from edited
JSON, or by patching bytes) must give the expected clean error from `tool_pte check` (exit 3
and a message naming the table/field and the file offset), never a crash.

    test_pte_reader.py BUILD_DIR [--write-corpus DIR]   (DIR: also save small seeds and bad files)
"""
import atexit
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

sys.path.insert(0, os.path.join(ROOT, "tests", "et"))
import fixture  # noqa: E402
import programs  # noqa: E402

CASES = programs.READER_CASES  # (name, partitioner, options, module source)


def fnv(b):
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


SCALAR_SIZE = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 12: 1, 13: 1, 14: 4, 15: 2, 16: 1,
               17: 1, 22: 2, 23: 1, 24: 1, 25: 1, 26: 1, 27: 2, 28: 4, 29: 8}
VK_SIZE = {0: 1, 1: 1, 2: 1, 3: 4, 4: 2, 5: 4, 6: 8, 7: 8}


def program_path(fx, case):
    """The path of a case's program in the unpacked fixture (exported from this very module)."""
    name = "reader_" + case[0]
    programs.build_checked(fx, name)  # raises if it is not that module's
    return os.path.join(fx.dir, fx.programs[name]["pte"])


class Mismatch(Exception):
    pass


def eq(what, got, want):
    if got != want:
        raise Mismatch(f"{what}: wgml {got!r} != executorch {want!r}")


def enum_val(x):
    return int(x.value) if hasattr(x, "value") else int(x)


def compare_value(what, got, ev, restored_consts, raw_program, mutable):
    from executorch.exir import schema as S
    v = ev.val
    kind = {S.Null: "null", S.Int: "int", S.Bool: "bool", S.Double: "double", S.Tensor: "tensor",
            S.String: "string", S.IntList: "int_list", S.DoubleList: "double_list", S.BoolList: "bool_list",
            S.TensorList: "tensor_list", S.OptionalTensorList: "optional_tensor_list"}[type(v)]
    eq(what + ".type", got["type"], kind)
    if kind == "int":
        eq(what, got["v"], v.int_val)
    elif kind == "bool":
        eq(what, got["v"], bool(v.bool_val))
    elif kind == "double":
        eq(what, got["v"], v.double_val if v.double_val == v.double_val else "nan")
    elif kind == "string":
        eq(what, got["v"], v.string_val)
    elif kind in ("int_list", "double_list", "bool_list", "tensor_list", "optional_tensor_list"):
        eq(what, got["v"], list(v.items))
    elif kind == "tensor":
        eq(what + ".scalar_type", got["scalar_type"], enum_val(v.scalar_type))
        eq(what + ".sizes", got["sizes"], list(v.sizes))
        eq(what + ".dim_order", got["dim_order"], list(v.dim_order))
        eq(what + ".data_buffer_idx", got["data_buffer_idx"], v.data_buffer_idx)
        eq(what + ".storage_offset", got["storage_offset"], v.storage_offset)
        eq(what + ".requires_grad", got["requires_grad"], bool(v.requires_grad))
        eq(what + ".shape_dynamism", got["shape_dynamism"], enum_val(v.shape_dynamism))
        eq(what + ".layout", got["layout"], v.layout)
        a = v.allocation_info
        if a is None:
            eq(what + ".allocation", got["allocation"], None)
        else:
            eq(what + ".allocation", got["allocation"],
               {"memory_id": a.memory_id, "memory_offset": a.memory_offset_low | (a.memory_offset_high << 32)})
        x = v.extra_tensor_info
        if x is None:
            eq(what + ".extra", got["extra"], None)
        else:
            eq(what + ".extra", got["extra"], {"mutable_data_segments_idx": x.mutable_data_segments_idx,
                                               "fqn": x.fully_qualified_name or "",
                                               "location": enum_val(x.location)})
        numel = 1
        for s in v.sizes:
            numel *= s
        nbytes = numel * SCALAR_SIZE[enum_val(v.scalar_type)]
        eq(what + ".nbytes", got["nbytes"], nbytes)
        if x is not None and enum_val(x.location) == 1:
            eq(what + ".data_kind", got["data_kind"], 3)
        elif v.data_buffer_idx > 0 and a is None:
            eq(what + ".data_kind", got["data_kind"], 1)
            want = bytes(restored_consts[v.data_buffer_idx].storage)[:nbytes]
            eq(what + ".data.size", got["data"]["size"], nbytes)
            eq(what + ".data (bytes)", got["data"]["fnv"], fnv(want))
        elif v.data_buffer_idx > 0:
            eq(what + ".data_kind", got["data_kind"], 2)
            want = bytes(mutable[v.data_buffer_idx].storage)[:nbytes]
            eq(what + ".data (bytes)", got["data"]["fnv"], fnv(want))
        else:
            eq(what + ".data_kind", got["data_kind"], 0)


def compare_vk(what, got, blob, named):
    """One VulkanBackend blob: the header and the VkGraph against the Vulkan serialisation module."""
    from executorch.backends.vulkan.serialization import vulkan_graph_schema as V
    from executorch.backends.vulkan.serialization.vulkan_graph_serialize import (
        VulkanDelegateHeader, flatbuffer_to_vk_graph)
    h = VulkanDelegateHeader.from_bytes(blob[:VulkanDelegateHeader.EXPECTED_LENGTH])
    eq(what + ".flatbuffer_offset", got["flatbuffer_offset"], h.flatbuffer_offset)
    eq(what + ".flatbuffer_size", got["flatbuffer_size"], h.flatbuffer_size)
    eq(what + ".bytes_offset", got["bytes_offset"], h.bytes_offset)
    eq(what + ".bytes_size", got["bytes_size"], h.bytes_size)
    g = flatbuffer_to_vk_graph(blob[h.flatbuffer_offset:h.flatbuffer_offset + h.flatbuffer_size])
    eq(what + ".version", got["version"], g.version)
    eq(what + ".n_values", len(got["values"]), len(g.values))
    names = {V.Null: "null", V.Int: "int", V.Double: "double", V.Bool: "bool", V.VkTensor: "tensor",
             V.IntList: "int_list", V.DoubleList: "double_list", V.BoolList: "bool_list",
             V.ValueList: "value_list", V.String: "string", V.SymInt: "symint"}
    for i, (gv, vv) in enumerate(zip(got["values"], g.values)):
        w = f"{what}.values[{i}]"
        v = vv.value
        eq(w + ".type", gv["type"], names[type(v)])
        if isinstance(v, V.VkTensor):
            eq(w + ".datatype", gv["datatype"], enum_val(v.datatype))
            eq(w + ".dims", gv["dims"], list(v.dims))
            eq(w + ".constant_id", gv["constant_id"], v.constant_id)
            eq(w + ".mem_obj_id", gv["mem_obj_id"], v.mem_obj_id)
            eq(w + ".storage_type", gv["storage_type"], enum_val(v.storage_type))
            eq(w + ".memory_layout", gv["memory_layout"], enum_val(v.memory_layout))
            eq(w + ".staging_datatype", gv["staging_datatype"], enum_val(v.staging_datatype))
            numel = 1
            for d in v.dims:
                numel *= d
            eq(w + ".nbytes", gv["nbytes"], numel * VK_SIZE[enum_val(v.datatype)])
        elif isinstance(v, V.Int):
            eq(w, gv["v"], v.int_val)
        elif isinstance(v, V.Double):
            eq(w, gv["v"], v.double_val)
        elif isinstance(v, V.Bool):
            eq(w, gv["v"], bool(v.bool_val))
        elif isinstance(v, V.String):
            eq(w, gv["v"], v.string_val)
        elif isinstance(v, V.SymInt):
            eq(w, gv["v"], v.value)
        elif not isinstance(v, V.Null):
            eq(w, gv["v"], list(v.items))
    eq(what + ".n_chain", len(got["chain"]), len(g.chain))
    for i, (gc, oc) in enumerate(zip(got["chain"], g.chain)):
        eq(f"{what}.chain[{i}]", (gc["node_id"], gc["name"], gc["args"]), (oc.node_id, oc.name, list(oc.args)))
    eq(what + ".input_ids", got["input_ids"], list(g.input_ids))
    eq(what + ".output_ids", got["output_ids"], list(g.output_ids))
    eq(what + ".n_constants", len(got["constants"]), len(g.constants))
    eq(what + ".n_shaders", got["n_shaders"], len(g.shaders))
    section = blob[h.bytes_offset:h.bytes_offset + h.bytes_size] if h.bytes_size else blob[h.bytes_offset:]
    for i, (gk, k) in enumerate(zip(got["constants"], g.constants)):
        w = f"{what}.constants[{i}]"
        eq(w, (gk["offset"], gk["length"], gk["named_key"]), (k.offset, k.length, k.named_key or ""))
        if k.offset == 2**64 - 1:
            want = named[k.named_key][:k.length]
        else:
            want = section[k.offset:k.offset + k.length]
        eq(w + ".length", gk["data"]["size"], k.length)
        eq(w + " (bytes)", gk["data"]["fnv"], fnv(want))
    return g


def compare(path, dump):
    """Field-by-field comparison of tool_pte's JSON with ExecuTorch's reading of the file."""
    from executorch.exir import schema as S
    from executorch.exir._serialize._flatbuffer_program import _flatbuffer_to_program
    from executorch.exir._serialize._program import _get_extended_header, deserialize_pte_binary
    data = open(path, "rb").read()
    eh = _get_extended_header(data)
    program_size = eh.program_size if eh else len(data)
    raw = _flatbuffer_to_program(data[:program_size])  # segments as stored
    restored = deserialize_pte_binary(data)  # segments moved back inline by ExecuTorch
    rp = restored.program
    eq("has_header", dump["has_header"], eh is not None)
    if eh:
        eq("program_size", dump["program_size"], eh.program_size)
        eq("segment_base_offset", dump["segment_base_offset"], eh.segment_base_offset)
        eq("segment_data_size", dump["segment_data_size"], eh.segment_data_size)
    eq("version", dump["version"], raw.version)
    eq("segments", [(s["offset"], s["size"]) for s in dump["segments"]], [(s.offset, s.size) for s in (raw.segments or [])])
    for i, s in enumerate(raw.segments or []):
        at = (eh.segment_base_offset if eh else 0) + s.offset
        eq(f"segments[{i}] (bytes)", dump["segments"][i]["bytes"]["fnv"], fnv(data[at:at + s.size]))
    cs = raw.constant_segment
    if cs is not None and dump["constant_segment"] is not None:
        eq("constant_segment", (dump["constant_segment"]["segment_index"], dump["constant_segment"]["offsets"]),
           (cs.segment_index, list(cs.offsets)))
    eq("n_constant_buffer", len(dump["constant_buffer"]), len(raw.constant_buffer or []))
    eq("named_data", [(n["key"], n["segment_index"]) for n in dump["named_data"]],
       [(n.key, n.segment_index) for n in (raw.named_data or [])])
    named = {}
    if restored.named_data is not None:
        nd = restored.named_data
        for key, entry in nd.pte_data.items():
            buf = nd.buffers[entry.buffer_index]
            named[key] = bytes(getattr(buf, "buffer", buf))
    for n in dump["named_data"]:
        eq(f"named_data['{n['key']}'] (bytes)", n["bytes"]["fnv"], fnv(named[n["key"]]))
    eq("mutable_data_segments", len(dump["mutable_data_segments"]), len(raw.mutable_data_segments or []))
    consts = rp.constant_buffer
    mutable = restored.mutable_data or []
    eq("n_plans", len(dump["plans"]), len(raw.execution_plan))
    counts = {"values": 0, "tensors": 0, "const_bytes": 0, "instructions": 0, "delegates": 0, "vk_ops": 0,
              "vk_values": 0, "vk_constants": 0}
    for pi, (gp, plan) in enumerate(zip(dump["plans"], raw.execution_plan)):
        w = f"plans[{pi}]"
        eq(w + ".name", gp["name"], plan.name)
        eq(w + ".inputs", gp["inputs"], list(plan.inputs))
        eq(w + ".outputs", gp["outputs"], list(plan.outputs))
        eq(w + ".non_const_buffer_sizes", gp["non_const_buffer_sizes"], list(plan.non_const_buffer_sizes))
        eq(w + ".operators", [(o["name"], o["overload"]) for o in gp["operators"]],
           [(o.name, o.overload or "") for o in plan.operators])
        eq(w + ".n_values", len(gp["values"]), len(plan.values))
        for i, (gv, ev) in enumerate(zip(gp["values"], plan.values)):
            compare_value(f"{w}.values[{i}]", gv, ev, consts, raw, mutable)
            counts["values"] += 1
            if gv["type"] == "tensor":
                counts["tensors"] += 1
                counts["const_bytes"] += gv["data"]["size"]
        eq(w + ".n_chains", len(gp["chains"]), len(plan.chains))
        for ci, (gc, ch) in enumerate(zip(gp["chains"], plan.chains)):
            eq(f"{w}.chains[{ci}].inputs", gc["inputs"], list(ch.inputs))
            eq(f"{w}.chains[{ci}].outputs", gc["outputs"], list(ch.outputs))
            eq(f"{w}.chains[{ci}].n_instructions", len(gc["instructions"]), len(ch.instructions))
            for k, (gi, ins) in enumerate(zip(gc["instructions"], ch.instructions)):
                a = ins.instr_args
                wi = f"{w}.chains[{ci}].instructions[{k}]"
                if isinstance(a, S.KernelCall):
                    eq(wi, gi, {"type": "kernel", "op_index": a.op_index, "args": list(a.args)})
                elif isinstance(a, S.DelegateCall):
                    eq(wi, gi, {"type": "delegate", "delegate_index": a.delegate_index, "args": list(a.args)})
                elif isinstance(a, S.MoveCall):
                    eq(wi, gi, {"type": "move", "move_from": a.move_from, "move_to": a.move_to})
                elif isinstance(a, S.JumpFalseCall):
                    eq(wi, gi, {"type": "jump_false", "cond_value_index": a.cond_value_index,
                                "destination_instruction": a.destination_instruction})
                else:
                    eq(wi, gi, {"type": "free", "value_index": a.value_index})
                counts["instructions"] += 1
        eq(w + ".n_delegates", len(gp["delegates"]), len(plan.delegates))
        for di, (gd, d) in enumerate(zip(gp["delegates"], plan.delegates)):
            wd = f"{w}.delegates[{di}]"
            eq(wd + ".id", gd["id"], d.id)
            eq(wd + ".processed", (gd["location"], gd["index"]),
               (enum_val(d.processed.location), d.processed.index))
            eq(wd + ".compile_specs", [(c["key"], c["value"]) for c in gd["compile_specs"]],
               [(c.key, list(c.value)) for c in d.compile_specs])
            rd = rp.execution_plan[pi].delegates[di]  # restored: inline data
            blob = bytes(rp.backend_delegate_data[rd.processed.index].data)
            eq(wd + ".processed (bytes)", (gd["processed"]["size"], gd["processed"]["fnv"]), (len(blob), fnv(blob)))
            counts["delegates"] += 1
            if d.id == "VulkanBackend":
                if gd["vk"] is None:
                    raise Mismatch(f"{wd}: the blob did not parse: {gd.get('vk_error')}")
                g = compare_vk(wd + ".vk", gd["vk"], blob, named)
                counts["vk_ops"] += len(g.chain)
                counts["vk_values"] += len(g.values)
                counts["vk_constants"] += len(g.constants)
    return counts


def run_tool(tool, mode, path):
    return subprocess.run([tool, mode, path], capture_output=True, text=True, timeout=60)


# ---- bad files ------------------------------------------------------------------------------

def flatc_roundtrip(blob, schema_kind, edit):
    """Decodes a flatbuffer to JSON with ExecuTorch's flatc and schema, applies edit(obj),
    encodes it back."""
    from executorch.exir._serialize import _flatbuffer as F
    with tempfile.TemporaryDirectory() as d:
        if schema_kind == "program":
            info = F._prepare_schema(d)
            schema = info.root_path
        else:
            import importlib.util
            spec = importlib.util.find_spec("executorch.backends.vulkan.serialization")
            src = os.path.join(list(spec.submodule_search_locations)[0], "schema.fbs")
            schema = os.path.join(d, "schema.fbs")
            with open(src, "rb") as f, open(schema, "wb") as o:
                o.write(f.read())
        binp = os.path.join(d, "data.bin")
        with open(binp, "wb") as f:
            f.write(blob)
        F._flatc_decompile(d, schema, binp, ["--raw-binary"] if schema_kind != "program" else None)
        with open(os.path.join(d, "data.json")) as f:
            obj = json.load(f)
        edit(obj)
        with open(os.path.join(d, "data.json"), "w") as f:
            json.dump(obj, f)
        os.unlink(binp)
        F._flatc_compile(d, schema, os.path.join(d, "data.json"))
        # the output is data.<the schema's file_extension>: .pte for the program, .bin otherwise
        out = os.path.join(d, "data.pte" if schema_kind == "program" else "data.bin")
        with open(out, "rb") as f:
            return f.read()


def replace_program(data, edit):
    """The file with its Program flatbuffer re-encoded (by flatc) after edit; the segments are
    kept as they were, after the new flatbuffer (the extended header's program size and segment
    base offset are rewritten)."""
    eh_size, base = struct.unpack_from("<QQ", data, 16)
    new = flatc_roundtrip(data[:eh_size], "program", edit)
    root = struct.unpack_from("<I", new, 0)[0]
    # flatc does not write the extended header: put it after the identifier and shift the rest
    # by its 32 bytes (offsets inside a flatbuffer are relative; only the root offset, counted
    # from byte 0, moves)
    out = bytearray(struct.pack("<I", root + 32) + new[4:8] + data[8:40] + new[8:])
    new_base = (len(out) + 15) // 16 * 16
    struct.pack_into("<QQ", out, 16, len(out), new_base)
    out += b"\0" * (new_base - len(out))
    return bytes(out) + data[base:]


def vk_blob_location(dump):
    d = dump["plans"][0]["delegates"][0]
    return d["processed"]["file_offset"], d["processed"]["size"]


def replace_vk(data, dump, edit):
    """The file with delegate 0's VkGraph re-encoded after edit, padded to its old size."""
    off, size = vk_blob_location(dump)
    blob = data[off:off + size]
    fo, fs = struct.unpack_from("<II", blob, 10)
    new = flatc_roundtrip(blob[fo:fo + fs], "vk", edit)
    if len(new) > fs:
        # it no longer fits: a new blob (header, graph, the same constant bytes) appended as
        # the delegate's segment after the others
        bo = struct.unpack_from("<I", blob, 18)[0]
        fb_len = (len(new) + 15) // 16 * 16
        nb = (b"\0" * 4 + b"VH00" + struct.pack("<HIIIQ", 30, 32, len(new), 32 + fb_len,
                                                 struct.unpack_from("<Q", blob, 22)[0]) + b"\0" * 2
              + new + b"\0" * (fb_len - len(new)) + blob[bo:])
        base = struct.unpack_from("<Q", data, 24)[0]
        seg_off = (len(data) - base + 15) // 16 * 16
        seg = dump["plans"][0]["delegates"][0]["index"]

        def move(o):
            o["segments"][seg]["offset"] = seg_off
            o["segments"][seg]["size"] = len(nb)
        out = replace_program(data, move)
        new_base = struct.unpack_from("<Q", out, 24)[0]
        return out + b"\0" * (new_base + seg_off - len(out)) + nb
    nb = bytearray(blob)
    nb[fo:fo + fs] = new + b"\0" * (fs - len(new))
    struct.pack_into("<I", nb, 14, len(new))
    return data[:off] + bytes(nb) + data[off + size:]


def patch(data, at, fmt, value):
    b = bytearray(data)
    struct.pack_into(fmt, b, at, value)
    return bytes(b)


def bad_cases(data, dump):
    """(name, bytes, expected status word, expected substring) for corruptions of a Vulkan program."""
    off, size = vk_blob_location(dump)
    ps = dump["program_size"]
    cases = [
        ("wrong_magic", data[:4] + b"XT12" + data[8:], "malformed file", "file identifier 'XT12' at file offset 4 is not 'ET12'"),
        ("eh_length", patch(data, 12, "<I", 8), "malformed file", "extended header length 8 is less than 24"),
        ("program_size_huge", patch(data, 16, "<Q", 1 << 40), "malformed file", "program size 1099511627776 outside"),
        ("segment_base_past_end", patch(data, 24, "<Q", len(data) + 16), "malformed file", "segment base offset"),
        ("truncated_segments", data[:off + size // 2], "malformed file", "outside the"),
        ("root_offset_huge", patch(data, 0, "<I", 0x7FFFFFF0), "malformed file", "Program: root offset 2147483632 outside the 1216-byte buffer at file offset 0"),
        ("vh00_magic", patch(data, off + 4, "<4s", b"VX00"), "malformed file", "pte: delegate 0 blob: no VH00 magic"),
        ("vh00_fb_range", patch(data, off + 14, "<I", size + 1000), "malformed file",
         "pte: delegate 0 blob: VH00 flatbuffer range [32, %d) outside blob of %d bytes" % (32 + size + 1000, size)),
        ("vh00_header_length", patch(data, off + 8, "<H", 12), "malformed file", "VH00 header length 12 is less than 30"),
        ("vh00_bytes_offset", patch(data, off + 18, "<I", 16), "malformed file", "VH00 constant bytes offset 16 is before"),
        ("vk00_ident", patch(data, off + 32 + 4, "<4s", b"VKXX"), "malformed file", "file identifier 'VKXX' is not 'VK00'"),
        ("vk_root_huge", patch(data, off + 32, "<I", 0xFFFFFFF0), "malformed file", "VkGraph: root offset 4294967280 outside"),
    ]
    # edits through flatc (valid flatbuffers with wrong contents)
    def prog_edit(fn):
        return replace_program(data, fn)

    def set_delegate_index(o):
        for ins in o["execution_plan"][0]["chains"][0]["instructions"]:
            if ins["instr_args_type"] == "DelegateCall":
                ins["instr_args"]["delegate_index"] = 7

    def set_arg(o):
        for ins in o["execution_plan"][0]["chains"][0]["instructions"]:
            ins["instr_args"]["args"][0] = 4000

    def set_segment(o):
        o["execution_plan"][0]["delegates"][0]["processed"]["index"] = 99

    def set_input(o):
        o["execution_plan"][0]["inputs"] = [-2]

    def set_dtype(o):
        for v in o["execution_plan"][0]["values"]:
            if v["val_type"] == "Tensor":
                v["val"]["scalar_type"] = 42
                break

    def set_named_segment(o):
        o["named_data"][0]["segment_index"] = 50

    cases += [
        ("delegate_index", prog_edit(set_delegate_index), "malformed file", "DelegateCall.delegate_index 7 out of range (1 delegates)"),
        ("value_id", prog_edit(set_arg), "malformed file", "DelegateCall.args[0]: value id 4000 out of range"),
        ("segment_index", prog_edit(set_segment), "malformed file", "segment index 99 out of range"),
        ("input_id", prog_edit(set_input), "malformed file", "execution_plan[0].inputs[0]: value id -2 out of range"),
        ("scalar_type", prog_edit(set_dtype), "malformed file", "unknown scalar_type 42"),
        ("named_segment", prog_edit(set_named_segment), "malformed file", "segment_index 50 out of range"),
    ]

    def vk_edit(fn):
        return replace_vk(data, dump, fn)

    def vk_op_arg(o):
        o["chain"][0]["args"][0] = 999

    def vk_constant_id(o):
        for v in o["values"]:
            if v["value_type"] == "VkTensor" and v["value"]["constant_id"] >= 0:
                v["value"]["constant_id"] = 77
                break

    def vk_dtype_mismatch(o):
        for v in o["values"]:
            if v["value_type"] == "VkTensor" and v["value"]["constant_id"] >= 0:
                v["value"]["datatype"] = "FLOAT64"
                break

    def vk_cycle(o):
        n = len(o["values"])
        o["values"].append({"value_type": "ValueList", "value": {"items": [n + 1]}})
        o["values"].append({"value_type": "ValueList", "value": {"items": [n]}})

    def vk_named_key(o):
        for k in o["constants"]:
            k["named_key"] = "no-such-key"
            k["offset"] = 2**64 - 1
            break

    def vk_output(o):
        o["output_ids"] = [12345]

    cases += [
        ("vk_op_arg", vk_edit(vk_op_arg), "malformed file", "VkGraph.chain[0] (aten."),
        ("vk_constant_id", vk_edit(vk_constant_id), "malformed file", "VkTensor.constant_id 77 out of range"),
        ("vk_dtype_mismatch", vk_edit(vk_dtype_mismatch), "malformed file", "a float64 tensor of 12 elements (96 bytes) has constant 0 of 48 bytes"),
        ("vk_cycle", vk_edit(vk_cycle), "malformed file", "contains it (a cycle)"),
        ("vk_named_key", vk_edit(vk_named_key), "malformed file", "named_key 'no-such-key' is not in the program's named data"),
        ("vk_output", vk_edit(vk_output), "malformed file", "VkGraph.output_ids[0]: value id 12345 out of range"),
    ]
    cases += unknown_union_cases(data, dump)
    return cases


MARK = 0x1122334455667788


def union_type_candidates(buf, marker_pos, type_code):
    """Positions of bytes equal to type_code near a table that holds a uoffset to the table at
    marker_pos - 4 or thereabouts: the union's type byte is among them."""
    out = []
    for p in range(0, len(buf) - 4, 4):
        to = p + struct.unpack_from("<I", buf, p)[0]
        if marker_pos - 16 <= to <= marker_pos:
            out += [q for q in range(max(0, p - 12), min(len(buf), p + 12)) if buf[q] == type_code]
    return sorted(set(out))


def unknown_union_cases(data, dump):
    """An EValue and a VkValue of type 99: one Int value is given a marker, then each byte near
    the offset to it that holds the Int type code is set to 99 in turn; the one that is the
    union's type must give the 'unsupported ... type 99' error (the others must still be
    clean errors or successes, which the fuzz replay and main() check)."""
    cases = []

    def prog_mark(o):
        o["execution_plan"][0]["values"].append({"val_type": "Int", "val": {"int_val": MARK}})
    prog = replace_program(data, prog_mark)
    ps = struct.unpack_from("<Q", prog, 16)[0]
    at = prog.find(struct.pack("<Q", MARK), 0, ps)
    for i, q in enumerate(union_type_candidates(prog[:ps], at, 2)):  # KernelTypes.Int = 2
        cases.append((f"evalue_type_{i}", patch(prog, q, "<B", 99), None, "unsupported EValue type 99"))

    def vk_mark(o):
        o["values"].append({"value_type": "Int", "value": {"int_val": MARK}})
    vk = replace_vk(data, dump, vk_mark)
    at = vk.find(struct.pack("<Q", MARK))
    for i, q in enumerate(union_type_candidates(vk, at, 2)):  # GraphTypes.Int = 2
        cases.append((f"vkvalue_type_{i}", patch(vk, q, "<B", 99), None, "unsupported VkValue type 99"))
    return cases


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    corpus = sys.argv[sys.argv.index("--write-corpus") + 1] if "--write-corpus" in sys.argv else None
    tool = os.path.join(build, "tests", "tool_pte")
    fx = fixture.open_for(build)
    failures = 0
    progs = {}
    for case in CASES:
        path = program_path(fx, case)
        r = run_tool(tool, "dump", path)
        if r.returncode != 0:
            print(f"FAIL {case[0]}: tool_pte dump exit {r.returncode}: {r.stderr.strip()}")
            failures += 1
            continue
        dump = json.loads(r.stdout)
        try:
            counts = compare(path, dump)
        except Mismatch as e:
            print(f"FAIL {case[0]} ({path}): {e}")
            failures += 1
            continue
        progs[case[0]] = (path, dump)
        print(f"ok   {case[0]}: {os.path.getsize(path)} bytes; "
              + ", ".join(f"{k} {v}" for k, v in counts.items()))
    # the comparison must be able to fail: a dump with one value changed is caught
    if "linear_relu" in progs:
        path, dump = progs["linear_relu"]
        bad = json.loads(json.dumps(dump))
        bad["plans"][0]["delegates"][0]["vk"]["chain"][0]["args"][0] += 1
        try:
            compare(path, bad)
            print("FAIL self-check: a changed op arg was not noticed")
            failures += 1
        except Mismatch as e:
            print(f"ok   self-check: a changed op arg is caught ({e})")
    # the non-Vulkan delegate is an error naming it (the portable program has no delegate: make
    # one by renaming the backend id of the Vulkan one)
    if "linear_relu" in progs:
        path, dump = progs["linear_relu"]
        data = open(path, "rb").read()

        def rename(o):
            o["execution_plan"][0]["delegates"][0]["id"] = "XnnpackBackend"
        other = replace_program(data, rename)
        with tempfile.NamedTemporaryFile(suffix=".pte", delete=False) as f:
            f.write(other)
        r = run_tool(tool, "check", f.name)
        os.unlink(f.name)
        want = "unsupported: pte: delegate 0: backend 'XnnpackBackend' is not supported"
        if r.returncode != 3 or want not in r.stderr:
            print(f"FAIL other_backend: exit {r.returncode}, {r.stderr.strip()!r}")
            failures += 1
        else:
            print(f"ok   other_backend: {r.stderr.strip()}")
        # corruptions
        n_bad = 0
        out_dir = tempfile.mkdtemp(prefix="pte_bad_")
        atexit.register(shutil.rmtree, out_dir, ignore_errors=True)
        union_hits = {"EValue": 0, "VkValue": 0}
        for name, blob, status, want in bad_cases(data, dump):
            p = os.path.join(out_dir, name + ".pte")
            with open(p, "wb") as f:
                f.write(blob)
            r = run_tool(tool, "check", p)
            msg = r.stderr.strip()
            if status is None:  # one candidate of several: clean either way, counted below
                if r.returncode not in (0, 3) or (r.returncode == 3 and not msg.startswith(("malformed file: pte", "unsupported: pte"))):
                    print(f"FAIL bad {name}: exit {r.returncode}, {msg!r}")
                    failures += 1
                elif want in msg and msg.startswith("unsupported: pte") and "file offset" in msg:
                    union_hits[want.split()[1]] += 1
                    print(f"ok   bad {name}: {msg}")
                    if corpus:
                        shutil.copy(p, os.path.join(corpus, "bad_" + name))
                continue
            if r.returncode != 3 or not msg.startswith(status + ": pte") or want not in msg or "file offset" not in msg:
                print(f"FAIL bad {name}: exit {r.returncode}, {msg!r} (want {want!r})")
                failures += 1
            else:
                n_bad += 1
                print(f"ok   bad {name}: {msg}")
            if corpus:
                os.makedirs(corpus, exist_ok=True)
                shutil.copy(p, os.path.join(corpus, "bad_" + name))
        shutil.rmtree(out_dir)
        for k, v in union_hits.items():
            if v != 1:
                print(f"FAIL unknown {k} union type: {v} candidates gave the error (want exactly 1)")
                failures += 1
        # truncation at every offset of the small program: a clean error each time
        trunc_bad = 0
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "t.pte")
            for n in range(len(data)):
                with open(p, "wb") as f:
                    f.write(data[:n])
                r = run_tool(tool, "check", p)
                if r.returncode != 3 or not r.stderr.startswith("malformed file: pte"):
                    trunc_bad += 1
                    if trunc_bad < 5:
                        print(f"FAIL truncated at {n}: exit {r.returncode}, {r.stderr.strip()!r}")
        failures += trunc_bad
        print(f"{'FAIL' if trunc_bad else 'ok  '} truncation at each of {len(data)} offsets: {trunc_bad} not a clean error")
    if corpus:
        for name, (path, dump) in progs.items():
            if os.path.getsize(path) <= 8192:
                shutil.copy(path, os.path.join(corpus, "good_" + name))
            for d in dump["plans"][0]["delegates"]:  # bare blobs: the fuzz target reads "VH00" files as blobs
                data = open(path, "rb").read()
                blob = data[d["processed"]["file_offset"]:d["processed"]["file_offset"] + d["processed"]["size"]]
                if len(blob) <= 8192:
                    with open(os.path.join(corpus, "blob_" + name), "wb") as f:
                        f.write(blob)
    print("FAILED" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
