# The operator files of ExecuTorch's backend test suite that must pass completely with wgml as
# the runtime, per flow (every case compared with eager PyTorch at the suite's tolerances).
# Written by tests/et/report.py from a full run; a file joins the list once all its cases pass.
set(WGML_ET_MUST_PASS_webgpu "test_abs,test_adaptive_avgpool1d,test_adaptive_avgpool2d,test_add,test_amax,test_amin,test_argmax,test_argmin,test_avgpool1d,test_avgpool2d,test_cat,test_clamp,test_elu,test_embedding,test_exp,test_expand,test_gelu,test_glu,test_hardsigmoid,test_hardtanh,test_relu,test_select,test_sigmoid,test_slice,test_squeeze,test_tanh,test_unsqueeze,test_view")
set(WGML_ET_MUST_PASS_vulkan "test_abs,test_add,test_amax,test_amin,test_argmax,test_argmin,test_select,test_sigmoid,test_slice,test_squeeze,test_tanh,test_unsqueeze,test_view")
