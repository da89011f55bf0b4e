/* ExecuTorch program (.pte) reader and the VulkanBackend delegate blob (VH00 header + VK00
 * VkGraph flatbuffer + constant bytes), host only.
 *
 * pte_parse verifies the whole program at once (every table, vector, string and union through
 * the bounds-checked flatbuffer reader of flatbuf.h, every index against the list it points
 * into, every data range against the file) and returns a decoded copy of the structure. What
 * is bulk data (constant tensors, segments, delegate blobs, named data) is not copied: it is a
 * pointer into the caller's bytes, checked to lie inside them, so the caller keeps those bytes
 * alive and unchanged while it uses the program. Lists of numbers are copied into host arrays
 * (aligned, native endian), so the caller's bytes need no particular alignment. Strings point
 * into the caller's bytes: each is checked to be NUL-terminated inside the buffer (as the
 * flatbuffer format writes them), so `s` can be used as a C string and `len` is its length.
 *
 * pte_vk_parse does the same for one VulkanBackend delegate: the VH00 header, the VkGraph
 * and each constant resolved to its bytes (inside the blob's constant section, or, for a
 * constant stored by name, the program's named data).
 *
 * Errors: WGML_ERR_FORMAT for a malformed file (the message names the table or field and the
 * file offset), WGML_ERR_UNSUPPORTED for a valid feature this reader does not take (a
 * delegate of another backend handed to pte_vk_parse, an unknown value type), WGML_ERR_ARG
 * for bad arguments, WGML_ERR_OOM when a host allocation fails. Messages go to err
 * (src/io/errbuf.h conventions) and start with "pte: ". On failure *out is NULL. */
#ifndef WGML_IO_PTE_H
#define WGML_IO_PTE_H

#include "wgml.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the program (schema executorch_flatbuffer, file identifier "ET12") ---------------- */

/* ExecuTorch ScalarType codes (scalar_type.fbs). */
typedef enum pte_scalar_type {
    PTE_BYTE = 0, /* uint8 */
    PTE_CHAR = 1, /* int8 */
    PTE_SHORT = 2,
    PTE_INT = 3,
    PTE_LONG = 4,
    PTE_HALF = 5,
    PTE_FLOAT = 6,
    PTE_DOUBLE = 7,
    PTE_BOOL = 11,
    PTE_QINT8 = 12,
    PTE_QUINT8 = 13,
    PTE_QINT32 = 14,
    PTE_BFLOAT16 = 15,
    PTE_QUINT4X2 = 16,
    PTE_QUINT2X4 = 17,
    PTE_BITS16 = 22,
    PTE_FLOAT8E5M2 = 23,
    PTE_FLOAT8E4M3FN = 24,
    PTE_FLOAT8E5M2FNUZ = 25,
    PTE_FLOAT8E4M3FNUZ = 26,
    PTE_UINT16 = 27,
    PTE_UINT32 = 28,
    PTE_UINT64 = 29
} pte_scalar_type;

/* Bytes per element of a scalar type; 0 for a code that is not a known type. */
size_t pte_scalar_type_size(int scalar_type);
/* "float", "long", ...; "?" for an unknown code. */
const char *pte_scalar_type_name(int scalar_type);

/* A string inside the caller's bytes (NUL-terminated there). An absent string is {"", 0}. */
typedef struct pte_str {
    const char *s;
    uint32_t len;
} pte_str;

/* The decoded lists of a value, one type each for the program's EValue and the Vulkan graph's
 * VkValue: items in the parse's arena, n of them. pte_id_list: value ids. */
typedef struct pte_int_list { const int64_t *items; uint32_t n; } pte_int_list;
typedef struct pte_double_list { const double *items; uint32_t n; } pte_double_list;
typedef struct pte_bool_list { const bool *items; uint32_t n; } pte_bool_list;
typedef struct pte_id_list { const int32_t *items; uint32_t n; } pte_id_list;

/* Bytes inside the caller's bytes. file_offset: where data starts in the file. */
typedef struct pte_bytes {
    const uint8_t *data;
    uint64_t size;
    uint64_t file_offset;
} pte_bytes;

/* Where a tensor's initial data lives (what pte_parse resolved it to). */
typedef enum pte_data_kind {
    PTE_DATA_NONE = 0,          /* no data in the file: an input, an activation or an output */
    PTE_DATA_CONSTANT = 1,      /* constant: constant_segment (or the legacy constant_buffer) */
    PTE_DATA_MUTABLE = 2,       /* mutable with an initial state: mutable_data_segments */
    PTE_DATA_EXTERNAL = 3       /* stored outside the file (a .ptd), keyed by fqn; data NULL */
} pte_data_kind;

typedef struct pte_tensor {
    int8_t scalar_type;      /* pte_scalar_type, checked to be known */
    int32_t storage_offset;  /* in elements; ExecuTorch supports only 0 (not checked here) */
    uint32_t rank;
    const int32_t *sizes;    /* rank entries, each >= 0 (upper bounds when dynamic) */
    const uint8_t *dim_order;/* n_dim_order entries (0 when absent); each < rank when present */
    uint32_t n_dim_order;
    bool requires_grad;
    uint32_t data_buffer_idx;
    bool has_allocation;     /* allocation_info present: memory-planned */
    uint32_t memory_id;      /* allocation_info.memory_id */
    uint64_t memory_offset;  /* memory_offset_low | memory_offset_high << 32 */
    int8_t layout;
    int8_t shape_dynamism;   /* 0 static, 1 dynamic bound, 2 dynamic unbound */
    /* extra_tensor_info (all zero/empty when absent) */
    bool has_extra;
    uint64_t mutable_data_segments_idx;
    pte_str fqn;             /* fully_qualified_name */
    int8_t location;         /* 0 segment, 1 external */
    /* resolved */
    uint64_t numel;          /* product of sizes */
    uint64_t nbytes;         /* numel * pte_scalar_type_size */
    pte_data_kind data_kind;
    pte_bytes data;          /* CONSTANT / MUTABLE: nbytes bytes inside the file; else empty */
} pte_tensor;

/* EValue union tags, numbered as in the schema's KernelTypes union (0 = NONE is rejected). */
typedef enum pte_value_type {
    PTE_VAL_NULL = 1,
    PTE_VAL_INT = 2,
    PTE_VAL_BOOL = 3,
    PTE_VAL_DOUBLE = 4,
    PTE_VAL_TENSOR = 5,
    PTE_VAL_STRING = 6,
    PTE_VAL_INT_LIST = 7,
    PTE_VAL_DOUBLE_LIST = 8,
    PTE_VAL_BOOL_LIST = 9,
    PTE_VAL_TENSOR_LIST = 10,         /* items: value ids, each a valid id */
    PTE_VAL_OPTIONAL_TENSOR_LIST = 11 /* items: value ids or -1 (None) */
} pte_value_type;

typedef struct pte_value {
    pte_value_type type;
    union {
        int64_t i;   /* INT */
        bool b;      /* BOOL */
        double d;    /* DOUBLE */
        pte_tensor tensor;
        pte_str str; /* STRING */
        pte_int_list int_list;
        pte_double_list double_list;
        pte_bool_list bool_list;
        pte_id_list tensor_list; /* TENSOR_LIST, OPTIONAL_TENSOR_LIST */
    } u;
} pte_value;

typedef struct pte_operator {
    pte_str name;     /* e.g. "aten::add" */
    pte_str overload; /* e.g. "out" ("" when absent) */
} pte_operator;

typedef enum pte_instr_type {
    PTE_INSTR_KERNEL = 1,
    PTE_INSTR_DELEGATE = 2,
    PTE_INSTR_MOVE = 3,
    PTE_INSTR_JUMP_FALSE = 4,
    PTE_INSTR_FREE = 5
} pte_instr_type;

/* One instruction; every index is checked: op_index < n_operators, delegate_index <
 * n_delegates, value ids < n_values, destination <= the chain's instruction count. */
typedef struct pte_instruction {
    pte_instr_type type;
    union {
        struct { int32_t op_index; const int32_t *args; uint32_t n_args; } kernel;
        struct { int32_t delegate_index; const int32_t *args; uint32_t n_args; } delegate;
        struct { int32_t move_from, move_to; } move;
        struct { int32_t cond_value_index, destination_instruction; } jump_false;
        struct { int32_t value_index; } free_call;
    } u;
} pte_instruction;

typedef struct pte_chain {
    const int32_t *inputs;
    uint32_t n_inputs;
    const int32_t *outputs;
    uint32_t n_outputs;
    pte_instruction *instructions;
    uint32_t n_instructions;
} pte_chain;

typedef struct pte_compile_spec {
    pte_str key;
    pte_bytes value;
} pte_compile_spec;

typedef struct pte_delegate {
    pte_str id;              /* backend id, e.g. "VulkanBackend" */
    int8_t location;         /* 0 inline (program.backend_delegate_data), 1 segment */
    uint32_t index;          /* into the list location names, checked */
    pte_bytes processed;     /* the blob, resolved and inside the file */
    pte_compile_spec *compile_specs;
    uint32_t n_compile_specs;
} pte_delegate;

typedef struct pte_plan {
    pte_str name;            /* method name, e.g. "forward" */
    pte_value *values;
    uint32_t n_values;
    const int32_t *inputs;   /* value ids, checked */
    uint32_t n_inputs;
    const int32_t *outputs;  /* value ids, checked */
    uint32_t n_outputs;
    pte_chain *chains;
    uint32_t n_chains;
    pte_operator *operators;
    uint32_t n_operators;
    pte_delegate *delegates;
    uint32_t n_delegates;
    const int64_t *non_const_buffer_sizes;
    uint32_t n_non_const_buffer_sizes;
} pte_plan;

typedef struct pte_segment {
    uint64_t offset;         /* relative to segment_base_offset, as stored */
    uint64_t size;
    pte_bytes bytes;         /* resolved: segment_base_offset + offset, inside the file */
} pte_segment;

typedef struct pte_subsegments {
    uint32_t segment_index;  /* checked < n_segments (when it has offsets) */
    const uint64_t *offsets;
    uint32_t n_offsets;
} pte_subsegments;

typedef struct pte_named_data {
    pte_str key;
    uint32_t segment_index;  /* checked < n_segments */
    pte_bytes bytes;         /* the segment's bytes */
} pte_named_data;

typedef struct pte_program {
    const uint8_t *file;     /* the caller's bytes */
    uint64_t file_size;
    /* extended header "eh00" at offset 8 (has_header false when absent: then there are no
     * segments and program_size is the file size) */
    bool has_header;
    uint64_t program_size;
    uint64_t segment_base_offset;
    uint64_t segment_data_size;
    uint32_t version;
    pte_plan *plans;
    uint32_t n_plans;
    pte_bytes *constant_buffer;      /* legacy inline constants (Buffer.storage) */
    uint32_t n_constant_buffer;
    pte_bytes *backend_delegate_data;/* inline delegate blobs */
    uint32_t n_backend_delegate_data;
    pte_segment *segments;
    uint32_t n_segments;
    bool has_constant_segment;
    pte_subsegments constant_segment;
    pte_subsegments *mutable_data_segments;
    uint32_t n_mutable_data_segments;
    pte_named_data *named_data;
    uint32_t n_named_data;
} pte_program;

/* Parses and verifies a whole program. data must stay alive while *out is used. */
wgml_status pte_parse(const uint8_t *data, size_t size, pte_program **out, char *err, size_t errlen);
void pte_free(pte_program *p);

/* The plan named name (NULL for the first); NULL when there is none. */
const pte_plan *pte_find_plan(const pte_program *p, const char *name);
/* The named data entry with this key; NULL when there is none. */
const pte_named_data *pte_find_named_data(const pte_program *p, const char *key, size_t key_len);

/* ---- the VulkanBackend delegate blob (schema vkgraph, file identifier "VK00") ---------- */

/* VkDataType codes. */
typedef enum pte_vk_dtype {
    PTE_VK_BOOL = 0,
    PTE_VK_UINT8 = 1,
    PTE_VK_INT8 = 2,
    PTE_VK_INT32 = 3,
    PTE_VK_FLOAT16 = 4,
    PTE_VK_FLOAT32 = 5,
    PTE_VK_FLOAT64 = 6,
    PTE_VK_INT64 = 7,
    PTE_VK_UNSET = 127 /* only as staging_datatype: "same as datatype" */
} pte_vk_dtype;

/* Bytes per element (1/1/1/4/2/4/8/8); 0 for UNSET or an unknown code. */
size_t pte_vk_dtype_size(int dtype);
const char *pte_vk_dtype_name(int dtype);

typedef struct pte_vk_tensor {
    int8_t datatype;         /* pte_vk_dtype 0..7, checked */
    uint32_t rank;
    const uint32_t *dims;
    int32_t constant_id;     /* >= 0: index into constants (checked; that constant's length >= nbytes);
                              * < 0: not a constant (absent: 0, the schema default) */
    int32_t mem_obj_id;      /* >= 0: shares memory object mem_obj_id; < 0: own memory */
    uint8_t storage_type;    /* hints (255 = default), not interpreted */
    uint8_t memory_layout;
    int8_t staging_datatype; /* PTE_VK_UNSET when absent */
    uint64_t numel;          /* product of dims */
    uint64_t nbytes;         /* numel * pte_vk_dtype_size(datatype) */
} pte_vk_tensor;

/* VkValue union tags, numbered as in the schema's GraphTypes union (0 = NONE is rejected). */
typedef enum pte_vk_value_type {
    PTE_VK_NULL = 1,
    PTE_VK_INT = 2,
    PTE_VK_DOUBLE = 3,
    PTE_VK_BOOLV = 4,
    PTE_VK_TENSOR = 5,
    PTE_VK_INT_LIST = 6,
    PTE_VK_DOUBLE_LIST = 7,
    PTE_VK_BOOL_LIST = 8,
    PTE_VK_VALUE_LIST = 9,   /* items: value ids, each valid; no list contains itself, directly or not */
    PTE_VK_STRING = 10,
    PTE_VK_SYMINT = 11
} pte_vk_value_type;

typedef struct pte_vk_value {
    pte_vk_value_type type;
    union {
        int64_t i;    /* INT */
        double d;     /* DOUBLE */
        bool b;       /* BOOLV */
        pte_vk_tensor tensor;
        pte_int_list int_list;
        pte_double_list double_list;
        pte_bool_list bool_list;
        pte_id_list value_list;
        pte_str str;  /* STRING */
        int32_t symint; /* SYMINT: its initial value */
    } u;
} pte_vk_value;

/* One OperatorCall: name is the fully qualified op ("aten.mm.default"); args are value ids in
 * schema order with the output id(s) last, each checked < n_values. */
typedef struct pte_vk_op {
    uint32_t node_id;
    pte_str name;
    const int32_t *args;
    uint32_t n_args;
} pte_vk_op;

/* One constant (VkBytes). named: offset was UINT64_MAX and the bytes come from the program's
 * named data under named_key; otherwise offset is relative to the blob's constant section.
 * data: the length bytes, resolved and checked to lie inside the blob or the named data. */
typedef struct pte_vk_constant {
    uint64_t offset;
    uint64_t length;
    pte_str named_key;
    bool named;
    pte_bytes data;
} pte_vk_constant;

typedef struct pte_vk_graph {
    /* VH00 header: flatbuffer and constant-bytes sections, offsets within the blob */
    uint32_t header_length;
    uint32_t flatbuffer_offset;
    uint32_t flatbuffer_size;
    uint32_t bytes_offset;
    uint64_t bytes_size;     /* as stored; 0 means "the rest of the blob" */
    pte_bytes constant_bytes;/* the resolved constant section */
    pte_str version;
    pte_vk_value *values;
    uint32_t n_values;
    pte_vk_op *chain;
    uint32_t n_chain;
    const uint32_t *input_ids;   /* checked < n_values */
    uint32_t n_inputs;
    const uint32_t *output_ids;  /* checked < n_values */
    uint32_t n_outputs;
    pte_vk_constant *constants;
    uint32_t n_constants;
    uint32_t n_shaders;          /* custom shaders (unused by wgml) */
    uint8_t storage_type_override;
    uint8_t memory_layout_override;
} pte_vk_graph;

/* Parses the delegate blob blob[0..size) (file_offset: where it starts in the program file,
 * for messages). p supplies the named data for constants stored by name; a named constant
 * whose key is not there is an error. p NULL (a blob read on its own): named constants are
 * left unresolved (data empty). label prefixes messages (e.g. "delegate 0"; NULL: "delegate"). */
wgml_status pte_vk_parse(const pte_program *p, const uint8_t *blob, size_t size, uint64_t file_offset,
                         const char *label, pte_vk_graph **out, char *err, size_t errlen);

/* pte_vk_parse of plan->delegates[index]: checks that its id is "VulkanBackend"
 * (WGML_ERR_UNSUPPORTED naming the id otherwise). */
wgml_status pte_vk_parse_delegate(const pte_program *p, const pte_plan *plan, uint32_t index,
                                  pte_vk_graph **out, char *err, size_t errlen);
void pte_vk_free(pte_vk_graph *g);

#endif
