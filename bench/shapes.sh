# The GEMM shapes of the performance keys, sourced by bench/h200.sh and bench/wgml_keys.sh:
# the squares, and the GEMMs of a SmolLM2 training step (8 x 512 = 4096 tokens) in their three
# orientations: forward x·Wᵀ (NT), dx = dy·W (NN), dW = dyᵀ·x (TN), for the projections
# 576->576 (q, o), 576->192 (k, v), 576->1536 (gate, up) and 1536->576 (down).
SQUARE=${SQUARE:-4096x4096x4096,8192x8192x8192,2048x2048x2048}
TRAIN=${TRAIN:-4096x576x576:NT 4096x576x576:NN 576x576x4096:TN 4096x192x576:NT 4096x576x192:NN 192x576x4096:TN \
4096x1536x576:NT 4096x576x1536:NN 1536x576x4096:TN 4096x576x1536:NT 4096x1536x576:NN 576x1536x4096:TN}
