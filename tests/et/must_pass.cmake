# The operator files of ExecuTorch's backend test suite that must pass completely with wgml as
# the runtime, per flow (every case compared with eager PyTorch at the suite's tolerances).
# Written by tests/et/report.py from a full run; a file joins the list once all its cases pass.
set(WGML_ET_MUST_PASS_webgpu "test_abs,test_add")
set(WGML_ET_MUST_PASS_vulkan "")
