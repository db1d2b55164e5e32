"""A labelled corpus of realistic failure logs, for measuring grouping quality.  [pure]

Each true group is one root cause in a Triton-like GPU compiler fork: pytest failures, lit /
FileCheck mismatches, compiler crashes and diagnostics, CUDA errors, timeouts, out-of-memory,
runner faults.  Every sample of a group varies what really varies between CI runs: the runner's
checkout folder, temporary paths, addresses, pids, timings, test parameters, line numbers that
moved, colours, and hundreds of lines of unrelated output around the failure (including lines
that merely mention "error", "timeout" or a retried connection reset).
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sample:
    group: str      # the true root cause
    test: str
    log: str


@dataclass(frozen=True, slots=True)
class Env:
    root: str       # the checkout folder of this runner
    site: str       # site-packages
    tmp: str        # a fresh temporary folder
    pid: int
    line_shift: int  # code moved between runs
    color: bool


def _env(r: random.Random) -> Env:
    root = r.choice(["/home/runner/work/triton/triton", "/workspace/fbtriton",
                     "/data/users/ci/src/triton", "/var/lib/buildkite-agent/builds/gpu-7/triton"])
    site = r.choice(["/usr/local/lib/python3.11/site-packages",
                     "/opt/conda/envs/ci/lib/python3.10/site-packages",
                     "/home/runner/.venv/lib/python3.12/site-packages"])
    tmp = r.choice(["/tmp/tmp", "/tmp/pytest-of-ci/pytest-", "/var/tmp/lit-tmp-"]) + "".join(
        r.choice("abcdefghijklmnopqrstuvwxyz0123456789_") for _ in range(8))
    return Env(root, site, tmp, r.randint(1000, 99999), r.randint(0, 40), r.random() < 0.3)


def _hex(r: random.Random, n: int = 12) -> str:
    return "0x" + "".join(r.choice("0123456789abcdef") for _ in range(n))


def _red(e: Env, text: str) -> str:
    return f"\x1b[1m\x1b[31m{text}\x1b[0m" if e.color else text


def _param(r: random.Random) -> str:
    return f"{r.choice(['float16', 'bfloat16', 'float32', 'float8e4nv'])}-{r.choice([16, 32, 64, 128, 256])}-" \
           f"{r.choice([1, 2, 4, 8])}"


def _traceback(e: Env, frames: list[tuple[str, str, str]], exc: str) -> str:
    out = ["Traceback (most recent call last):"]
    for path, func, code in frames:
        out += [f'  File "{path}", line {100 + len(func) * 7 + e.line_shift}, in {func}', f"    {code}"]
    return "\n".join(out + [exc])


def _pytest_block(e: Env, r: random.Random, test: str, stmt: str, elines: list[str], loc: str,
                  exc: str) -> str:
    body = [f"{'_' * 20} {test} {'_' * 20}", "", f"    def {test.split('[')[0]}(*args):",
            "        x = torch.randn(128, 128, device='cuda')", f">       {stmt}"]
    body += [_red(e, f"E       {ln}") for ln in elines]
    body += ["", f"{loc}:{r.randint(20, 900)}: {exc}"]
    return "\n".join(body)


Template = Callable[[random.Random, Env], tuple[str, str]]  # -> (test, failure text)


def _assert_close(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_matmul[{_param(r)}]"
    return test, _pytest_block(e, r, test, "torch.testing.assert_close(c, ref, atol=1e-2, rtol=0)", [
        "AssertionError: Tensor-likes are not close!", "",
        f"Mismatched elements: {r.randint(1, 900)} / 16384 ({r.random():.1f}%)",
        f"Greatest absolute difference: {r.random() * 10:.4f} at index ({r.randint(0, 127)}, {r.randint(0, 127)})"],
        f"{e.site}/torch/testing/_comparison.py", "AssertionError")


def _compilation_dtype(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_dot_mixed[{_param(r)}]"
    return test, _traceback(e, [
        (f"{e.root}/python/test/unit/language/test_core.py", "test_dot_mixed", "kernel[grid](a, b)"),
        (f"{e.root}/python/triton/runtime/jit.py", "run", "kernel = self.compile(src)"),
        (f"{e.root}/python/triton/compiler/compiler.py", "compile", "module = src.make_ir(...)")],
        f"triton.compiler.errors.CompilationError: at {r.randint(5, 40)}:{r.randint(4, 20)}:\n"
        f"    acc += tl.dot(a, b)\n           ^\nAssertionError('Both operands must be same dtype. "
        f"Got {r.choice(['fp16', 'bf16'])} and fp32')")


def _compilation_index(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_load_store[{_param(r)}]"
    return test, _traceback(e, [
        (f"{e.root}/python/test/unit/language/test_core.py", "test_load_store", "kernel[(1,)](x)"),
        (f"{e.root}/python/triton/compiler/compiler.py", "compile", "module = src.make_ir(...)")],
        f"triton.compiler.errors.CompilationError: at {r.randint(5, 40)}:{r.randint(4, 20)}:\n"
        f"    x = tl.load(ptr + offs[:, None])\n        ^\nValueError('unsupported tensor index: "
        f"constexpr[{r.randint(0, 4)}]')")


def _out_of_resources(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_flash_attention[{_param(r)}]"
    return test, _traceback(e, [
        (f"{e.root}/python/test/unit/test_flash_attention.py", "test_op", "_attn_fwd[grid](q, k, v)"),
        (f"{e.root}/python/triton/compiler/compiler.py", "_init_handles",
         "raise OutOfResources(self.metadata.shared, max_shared, 'shared memory')")],
        f"triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: "
        f"{r.randint(2, 9) * 32768}, Hardware limit: 232448. Reducing block sizes or `num_stages` may help.")


def _autotune_key(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_autotune_prune[{r.randint(1, 9)}]"
    return test, _traceback(e, [
        (f"{e.root}/python/test/unit/runtime/test_autotuner.py", "test_prune", "fn[grid](x)"),
        (f"{e.root}/python/triton/runtime/autotuner.py", "run", "key = [args[k] for k in self.keys]")],
        "KeyError: 'BLOCK_SIZE_K'")


def _dot_kwarg(r: random.Random, e: Env) -> tuple[str, str]:
    test = r.choice(["test_dot", "test_dot3d", "test_matmul_tf32", "test_scaled_dot"]) + f"[{_param(r)}]"
    return test, _traceback(e, [
        (f"{e.root}/python/test/unit/language/{test.split('[')[0]}.py", test.split("[")[0], "k[grid](a)"),
        (f"{e.root}/python/triton/language/core.py", "wrapper", "return fn(*args, **kwargs)")],
        "TypeError: dot() got an unexpected keyword argument 'allow_tf32'")


def _async_task_attr(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_warp_specialize_{r.choice(['gemm', 'fa', 'persistent'])}[{_param(r)}]"
    return test, _traceback(e, [
        (f"{e.root}/third_party/tlx/tutorials/ws_gemm.py", "matmul_kernel", "with tl.async_task([0]):")],
        "AttributeError: module 'triton.language' has no attribute 'async_task'")


def _import_name(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test/{r.choice(['bench', 'tools', 'tune'])}_{r.randint(1, 30)}.py"
    return test, _traceback(e, [(f"{e.root}/python/triton_kernels/bench/{test}", "<module>",
                                 "from triton.testing import get_cuda_autotuner")],
                            "ImportError: cannot import name 'get_cuda_autotuner' from 'triton.testing' "
                            f"({e.root}/python/triton/testing.py)")


def _ws_assert(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_num_warps[{_param(r)}]"
    n = r.choice([4, 8])
    return test, _pytest_block(e, r, test, "assert kernel.metadata.num_warps == expected",
                               [f"assert {n} == {n * 2}", f" +  where {n} = <CompiledKernel object at {_hex(r)}>.num_warps"],
                               f"{e.root}/python/test/unit/test_warp_specialization.py", "AssertionError")


def _mlir_verifier(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_pipeliner[{_param(r)}]"
    diag = (f'loc("{e.tmp}/kernel.py":{r.randint(10, 90)}:{r.randint(2, 30)}): error: '
            "'ttg.memdesc_subview' op operand #0 must be memory descriptor, but got 'tensor<128x64xf16>'")
    return test, diag + "\n" + _traceback(e, [
        (f"{e.root}/python/triton/compiler/compiler.py", "compile", "pm.run(mod)")],
        "RuntimeError: PassManager::run failed")


def _dynamo_backend(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_compile_{r.choice(['rmsnorm', 'softmax', 'rope'])}"
    return test, _traceback(e, [
        (f"{e.site}/torch/_dynamo/output_graph.py", "call_user_compiler", "compiled_fn = compiler_fn(gm)")],
        "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n"
        "NameError: name 'triton_helpers' is not defined")


def _not_impl(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_dot_scaled[{_param(r)}]"
    return test, _pytest_block(e, r, test, "_dot_scaled_kernel[grid](a, b, scale)",
                               [f"NotImplementedError: tl.dot_scaled is not supported on sm_{r.choice([80, 86])}"],
                               f"{e.root}/python/triton/language/semantic.py", "NotImplementedError")


def _filecheck(name: str, directive: str, check: str) -> Template:
    def make(r: random.Random, e: Env) -> tuple[str, str]:
        line = 10 + e.line_shift
        return f"{name}", "\n".join([
            f"******************** TEST 'TRITON :: {name}' FAILED ********************",
            f"# RUN: at line 1", f"triton-opt {e.root}/test/{name} -split-input-file | FileCheck {e.root}/test/{name}",
            "# executed command: FileCheck", "# .---command stderr------------",
            f"# | {e.root}/test/{name}:{line}:{r.randint(5, 20)}: error: {directive}: expected string not found in input",
            f"# | // {directive}: {check}", "# |               ^",
            f"# | <stdin>:{r.randint(1, 300)}:{r.randint(1, 40)}: note: scanning from here",
            f"# | module attributes {{\"ttg.num-warps\" = {r.choice([4, 8])} : i32}} {{",
            "# | Input was:", "# | <<<<<<",
            f"# |   {r.randint(1, 40)}: %{r.randint(0, 30)} = arith.constant 0 : i32",
            f"# | check:{line}'0     X~~~~~~~~~~~~~~~~~~~~~~~~~~~~ error: no match found",
            "# | >>>>>>", "# `-----------------------------", "# error: command failed with exit status: 1"])
    return make


def _filecheck_not(r: random.Random, e: Env) -> tuple[str, str]:
    name = "TritonGPU/loop-pipeline.mlir"
    return name, "\n".join([
        f"{e.root}/test/{name}:{200 + e.line_shift}:{r.randint(5, 20)}: error: CHECK-NOT: excluded string found in input",
        "// CHECK-NOT: ttg.local_load", "              ^",
        f"<stdin>:{r.randint(100, 400)}:{r.randint(1, 20)}: note: found here",
        f"  %{r.randint(10, 90)} = ttg.local_load %{r.randint(1, 9)} : !ttg.memdesc<128x64xf16>"])


def _filecheck_empty(r: random.Random, e: Env) -> tuple[str, str]:
    return "Conversion/tritongpu_to_llvm_hopper.mlir", "\n".join([
        "FileCheck error: '<stdin>' is empty.",
        f"FileCheck command line:  {e.root}/build/bin/FileCheck {e.root}/test/Conversion/tritongpu_to_llvm_hopper.mlir"])


def _llvm_crash_prefix(e: Env, r: random.Random, name: str) -> str:
    return "\n".join([f"# RUN: at line 1", f"triton-opt {e.root}/test/{name} --convert-triton-gpu-to-llvm"])


def _stack(r: random.Random, e: Env, syms: list[str]) -> str:
    out = ["PLEASE submit a bug report to https://github.com/llvm/llvm-project/issues/ and include the crash backtrace.",
           "Stack dump:", f"0.\tProgram arguments: {e.root}/build/bin/triton-opt {e.tmp}/input.mlir",
           f" #0 {_hex(r)} llvm::sys::PrintStackTrace(llvm::raw_ostream&, int) ({e.root}/build/bin/triton-opt+{_hex(r, 6)})",
           f" #1 {_hex(r)} SignalHandler(int) Signals.cpp:0:0",
           f" #2 {_hex(r)} __restore_rt (/lib/x86_64-linux-gnu/libc.so.6+{_hex(r, 5)})"]
    for i, s in enumerate(syms, 3):
        out.append(f" #{i} {_hex(r)} {s} ({e.root}/build/bin/triton-opt+{_hex(r, 6)})")
    return "\n".join(out)


def _assert_crash(r: random.Random, e: Env) -> tuple[str, str]:
    name = r.choice(["Conversion/tritongpu_to_llvm.mlir", "TritonGPU/combine.mlir", "TritonGPU/accelerate-matmul.mlir"])
    return name, "\n".join([_llvm_crash_prefix(e, r, name),
        f"triton-opt: {e.root}/lib/Tools/LinearLayout.cpp:{400 + e.line_shift}: mlir::triton::LinearLayout "
        "mlir::triton::LinearLayout::reshapeIns(...) const: Assertion `getTotalInDimSize() == "
        "product(newInDims)' failed.",
        _stack(r, e, ["mlir::triton::LinearLayout::reshapeIns(...) const", "mlir::triton::gpu::toLinearLayout(...)"]),
        "Aborted (core dumped)", "FileCheck error: '<stdin>' is empty."])


def _llvm_error(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_tma_store[{_param(r)}]"
    return test, "\n".join([f"LLVM ERROR: Failed to infer layout for op 'ttng.async_tma_copy_local_to_global'",
                            _stack(r, e, ["mlir::triton::nvidia_gpu::inferLayout(...)", "mlir::Pass::run"]),
                            "Fatal Python error: Aborted", "", "Current thread 0x00007f (most recent call first):",
                            f'  File "{e.root}/python/triton/compiler/compiler.py", line {300 + e.line_shift} in compile'])


def _segv_stack(r: random.Random, e: Env) -> tuple[str, str]:
    name = r.choice(["TritonNvidiaGPU/ws_code_partition.mlir", "TritonNvidiaGPU/ws_task_id.mlir"])
    return name, "\n".join([_llvm_crash_prefix(e, r, name), _stack(r, e, [
        "mlir::triton::nvidia_gpu::doCodePartition(mlir::triton::FuncOp&, unsigned int)",
        "mlir::triton::nvidia_gpu::WSCodePartitionPass::runOnOperation()",
        "mlir::detail::OpToOpPassAdaptor::run(mlir::Pass*, mlir::Operation*)"]),
        f"/bin/bash: line 1: {e.pid} Segmentation fault      (core dumped) triton-opt"])


def _unreachable(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_convert_layout[{_param(r)}]"
    return test, "\n".join(["Unexpected layout encoding",
                            f"UNREACHABLE executed at {e.root}/lib/Dialect/TritonGPU/IR/Dialect.cpp:{1200 + e.line_shift}!",
                            _stack(r, e, ["mlir::triton::gpu::getShapePerCTATile(mlir::Attribute)"])])


def _terminate(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_autows_{r.choice(['gemm', 'fa'])}"
    return test, "\n".join(["terminate called after throwing an instance of 'std::out_of_range'",
                            "  what():  map::at", "Fatal Python error: Aborted",
                            f"Thread {_hex(r)} (most recent call first):"])


def _cpp_build(r: random.Random, e: Env) -> tuple[str, str]:
    obj = r.choice(["WarpSpecialization.cpp.o", "TaskIdPropagate.cpp.o", "CodePartition.cpp.o"])
    return "build", "\n".join([
        f"[{r.randint(100, 900)}/{r.randint(900, 1200)}] Building CXX object lib/Dialect/TritonNvidiaGPU/Transforms/{obj}",
        f"FAILED: lib/Dialect/TritonNvidiaGPU/Transforms/CMakeFiles/obj.dir/{obj}",
        f"{e.root}/lib/Dialect/TritonNvidiaGPU/Transforms/WSUtility.h:{88 + e.line_shift}:{r.randint(3, 30)}: "
        "error: no member named 'getAsyncTaskIds' in 'mlir::Operation'",
        "    auto ids = op->getAsyncTaskIds();", "               ~~  ^",
        f"{e.root}/lib/Dialect/TritonNvidiaGPU/Transforms/WSUtility.h:{95 + e.line_shift}:{r.randint(3, 30)}: "
        "error: use of undeclared identifier 'ids'", "1 error generated.",
        "ninja: build stopped: subcommand failed."])


def _cuda_h(r: random.Random, e: Env) -> tuple[str, str]:
    return "build", "\n".join([
        f"{e.root}/third_party/nvidia/backend/driver.c:{1 + e.line_shift % 3}:10: fatal error: cuda.h: No such file or directory",
        "compilation terminated.", "error: command '/usr/bin/gcc' failed with exit code 1"])


def _cuda_illegal(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_persistent_matmul[{_param(r)}]"
    if r.random() < 0.5:
        exc = "RuntimeError: CUDA error: an illegal memory access was encountered\nCUDA kernel errors might " \
              "be asynchronously reported at some other API call, so the stacktrace below might be incorrect."
    else:
        exc = "RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered"
    return test, _traceback(e, [(f"{e.root}/python/test/unit/test_persistent.py", "test_persistent_matmul",
                                 "torch.cuda.synchronize()")], exc)


def _cuda_misaligned(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_tma_load[{_param(r)}]"
    return test, _traceback(e, [(f"{e.root}/python/test/unit/test_tma.py", "test_tma_load", "k[grid](d)")],
                            "RuntimeError: Triton Error [CUDA]: misaligned address")


def _device_assert(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_gather[{_param(r)}]"
    lines = [f"{e.site}/../aten/src/ATen/native/cuda/IndexKernel.cu:{92}: operator(): block: [{r.randint(0, 64)},0,0], "
             f"thread: [{r.randint(0, 127)},0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed."
             for _ in range(r.randint(1, 4))]
    return test, "\n".join(lines) + "\n" + _traceback(e, [
        (f"{e.root}/python/test/unit/test_gather.py", "test_gather", "assert torch.equal(out, ref)")],
        "RuntimeError: CUDA error: device-side assert triggered")


def _cublas(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_fp8_reference[{_param(r)}]"
    return test, _traceback(e, [(f"{e.root}/python/test/unit/test_fp8.py", "reference", "torch.matmul(a, b)")],
                            "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling "
                            "`cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb, "
                            "&fbeta, c, CUDA_R_16F, ldc, CUDA_R_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP)`")


def _nccl(r: random.Random, e: Env) -> tuple[str, str]:
    return f"fsdp2_train[rank{r.randint(0, 7)}]", _traceback(e, [
        (f"{e.site}/torch/distributed/distributed_c10d.py", "all_reduce", "work = group.allreduce([tensor], opts)")],
        f"torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
        f"{1970 + r.randint(0, 5)}, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version "
        f"2.{r.randint(18, 21)}.{r.randint(1, 5)}")


def _cuda_oom(r: random.Random, e: Env) -> tuple[str, str]:
    return f"test_fsdp2_llama[{r.choice(['8b', '70b'])}-bs{r.choice([8, 16])}]", _traceback(e, [
        (f"{e.site}/torch/nn/modules/linear.py", "forward", "return F.linear(input, self.weight, self.bias)")],
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {r.random() * 8:.2f} GiB. GPU {r.randint(0, 7)} "
        f"has a total capacity of 79.11 GiB of which {r.random() * 100:.2f} MiB is free. Process {e.pid} has "
        f"{r.random() * 79:.2f} GiB memory in use.")


def _host_killed(r: random.Random, e: Env) -> tuple[str, str]:
    return "compile_time_bench", "\n".join([f"compiling {r.randint(100, 900)} kernels with {r.randint(8, 64)} workers",
                                            f"/bin/sh: line 1: {e.pid} Killed                  python bench/compile_time.py"])


def _host_memoryerror(r: random.Random, e: Env) -> tuple[str, str]:
    return f"test_reference_large[{r.randint(1, 6)}]", _traceback(e, [
        (f"{e.site}/numpy/core/numeric.py", "zeros_like", "res = empty_like(a)")],
        f"numpy.core._exceptions._ArrayMemoryError: Unable to allocate {r.randint(20, 90)}.0 GiB for an array "
        f"with shape ({r.randint(10**5, 10**6)}, {r.randint(10**4, 10**5)}) and data type float32")


def _hang_sync(r: random.Random, e: Env) -> tuple[str, str]:
    test = f"test_warp_specialize_fa[{_param(r)}]"
    bar = "+" * 35
    return test, "\n".join([
        f"{bar} Timeout {bar}", f"{'~' * 30} Stack of Thread-{r.randint(1, 4)} ({r.randint(10**14, 10**15)}) {'~' * 30}",
        f'  File "/usr/lib/python3.11/threading.py", line {995}, in _bootstrap', "    self._bootstrap_inner()",
        f"{'~' * 30} Stack of MainThread ({r.randint(10**14, 10**15)}) {'~' * 30}",
        f'  File "{e.root}/python/test/unit/test_ws.py", line {50 + e.line_shift}, in test_warp_specialize_fa',
        "    torch.cuda.synchronize()",
        f'  File "{e.site}/torch/cuda/__init__.py", line {985}, in synchronize',
        "    return torch._C._cuda_synchronize()", f"{bar} Timeout {bar}"])


def _lit_timeout(r: random.Random, e: Env) -> tuple[str, str]:
    return "TritonGPU/optimize-dot-operands.mlir", \
        f"TIMEOUT: TRITON :: TritonGPU/optimize-dot-operands.mlir ({r.randint(1, 900)} of 1021)\n" \
        "Reached timeout of 600 seconds"


def _subprocess_timeout(r: random.Random, e: Env) -> tuple[str, str]:
    return f"test_torch_compile_time[{r.choice(['llama', 'gpt2', 'dlrm'])}]", _traceback(e, [
        (f"{e.root}/bench/compile_time.py", "measure", "subprocess.run(cmd, timeout=900, check=True)"),
        ("/usr/lib/python3.11/subprocess.py", "run", "stdout, stderr = process.communicate(input, timeout=timeout)"),
        ("/usr/lib/python3.11/subprocess.py", "_check_timeout", "raise TimeoutExpired(")],
        f"subprocess.TimeoutExpired: Command '['python', '{e.tmp}/run_model.py']' timed out after 900 seconds")


def _no_space(r: random.Random, e: Env) -> tuple[str, str]:
    return f"test_cache_{r.randint(1, 9)}", _traceback(e, [
        (f"{e.root}/python/triton/runtime/cache.py", "put", "with open(temp_path, mode) as f:")],
        f"OSError: [Errno 28] No space left on device: '{e.tmp}/.triton/cache/{_hex(r, 20)}/kernel.cubin'")


def _runner_lost(r: random.Random, e: Env) -> tuple[str, str]:
    return r.choice(["job:l1-h100", "job:l1-mi300"]), "\n".join([
        f"collected {r.randint(100, 3000)} items",
        "##[error]The runner has received a shutdown signal. This can happen when the runner service is stopped, "
        "or a manually started runner is canceled.", "##[error]The operation was canceled."])


def _no_gpu(r: random.Random, e: Env) -> tuple[str, str]:
    return f"test_{r.choice(['core', 'matmul', 'tma'])}", _traceback(e, [
        (f"{e.site}/torch/cuda/__init__.py", "_lazy_init", "torch._C._cuda_init()")],
        "RuntimeError: No CUDA GPUs are available\nCUDA initialization: no CUDA-capable device is detected")


def _pip_reset(r: random.Random, e: Env) -> tuple[str, str]:
    return "setup", "\n".join([
        f"Collecting torch==2.{r.randint(5, 8)}.0", "  Downloading torch-2.5.0-cp311-manylinux1_x86_64.whl (906.4 MB)",
        "ERROR: Exception:", "urllib3.exceptions.ProtocolError: (\"Connection broken: ConnectionResetError(104, "
        "'Connection reset by peer')\", ConnectionResetError(104, 'Connection reset by peer'))"])


def _gtest(r: random.Random, e: Env) -> tuple[str, str]:
    return "LinearLayoutTest.ReshapeOuts", "\n".join([
        "[ RUN      ] LinearLayoutTest.ReshapeOuts",
        f"{e.root}/unittest/Tools/LinearLayoutTest.cpp:{300 + e.line_shift}: Failure",
        "Expected equality of these values:", "  ll.getTotalOutDimSize()", f"    Which is: {r.choice([64, 128])}",
        "  32", f"[  FAILED  ] LinearLayoutTest.ReshapeOuts ({r.randint(0, 9)} ms)"])


def _make_error(r: random.Random, e: Env) -> tuple[str, str]:
    return "docs", "\n".join([f"writing output... [{r.randint(1, 99)}%] python-api/triton.language",
                              "Warning, treated as error:",
                              f"{e.root}/docs/python-api/triton.language.rst:{12 + e.line_shift}:autosummary: "
                              "failed to import tl.async_task.", f"make: *** [Makefile:{20}: html] Error 2"])


def _empty(r: random.Random, e: Env) -> tuple[str, str]:
    return f"test_silent_{r.randint(1, 3)}", ""


TEMPLATES: dict[str, Template] = {
    "pytest-assert-close": _assert_close, "compile-dot-dtype": _compilation_dtype,
    "compile-tensor-index": _compilation_index, "out-of-resources-smem": _out_of_resources,
    "autotune-keyerror": _autotune_key, "dot-allow-tf32-kwarg": _dot_kwarg,
    "tl-async-task-missing": _async_task_attr, "import-get-cuda-autotuner": _import_name,
    "ws-num-warps-assert": _ws_assert, "mlir-verifier-memdesc": _mlir_verifier,
    "dynamo-backend-nameerror": _dynamo_backend, "dot-scaled-notimpl": _not_impl,
    "fc-coalesce": _filecheck("TritonGPU/coalesce.mlir", "CHECK", "#ttg.blocked<{sizePerThread = [1, 4]"),
    "fc-combine": _filecheck("TritonGPU/combine.mlir", "CHECK-NEXT", "tt.return %[[V:.*]] : tensor<128xf32>"),
    "fc-mma-v3": _filecheck("TritonGPU/accelerate-matmul.mlir", "CHECK-SAME", "instrShape = [16, 256, 16]"),
    "fc-tma-lowering": _filecheck("TritonNvidiaGPU/tma_lowering.mlir", "CHECK", "ttng.async_tma_copy_global_to_local"),
    "fc-ws-partition": _filecheck("TritonNvidiaGPU/ws_code_partition.mlir", "CHECK-LABEL", "@matmul_kernel_tma_persistent"),
    "fc-amd-buffer-ops": _filecheck("TritonAMDGPU/convert-buffer-ops.mlir", "COMMON", "amdgpu.buffer_load %arg0"),
    "fc-pipeline-not": _filecheck_not, "fc-empty-hopper": _filecheck_empty,
    "crash-linear-layout-assert": _assert_crash, "crash-llvm-error-tma": _llvm_error,
    "crash-segv-code-partition": _segv_stack, "crash-unreachable-layout": _unreachable,
    "crash-terminate-map-at": _terminate, "build-getasynctaskids": _cpp_build, "build-cuda-h": _cuda_h,
    "cuda-illegal-access": _cuda_illegal, "cuda-misaligned": _cuda_misaligned,
    "cuda-device-assert-index": _device_assert, "cuda-cublas-exec": _cublas, "nccl-unhandled": _nccl,
    "oom-cuda-fsdp": _cuda_oom, "oom-host-killed": _host_killed, "oom-numpy": _host_memoryerror,
    "timeout-hang-synchronize": _hang_sync, "timeout-lit": _lit_timeout,
    "timeout-subprocess-compile": _subprocess_timeout, "infra-no-space": _no_space,
    "infra-runner-shutdown": _runner_lost, "infra-no-gpu": _no_gpu, "infra-pip-reset": _pip_reset,
    "gtest-reshape-outs": _gtest, "docs-autosummary": _make_error, "empty-log": _empty,
}

_NOISE = [
    "PASSED python/test/unit/language/test_core.py::test_bin_op[{p}]",
    "python/test/unit/language/test_core.py::test_reduce[{p}] PASSED [ {n}%]",
    "[{n}/1250] Building CXX object lib/Conversion/TritonGPUToLLVM/CMakeFiles/obj.dir/{w}.cpp.o",
    "{site}/torch/utils/_device.py:{n}: UserWarning: TF32 is enabled; set allow_tf32 to silence",
    "warning: unused variable 'ctx' [-Wunused-variable]  (compiled with -Werror=return-type)",
    "-- Found CUDA: /usr/local/cuda (found version \"12.{n}\")",
    "INFO:root:autotuning {w}: 24 configs, best BLOCK_M=128 in {f}ms",
    "PASS: TRITON :: TritonGPU/{w}.mlir ({n} of 1021)",
    "  warnings.warn(\"error_if_nonfinite is deprecated\")",
    "timeout = {n}", "Test results: 0 errors, {n} passed",
    "{date} [rank{n}] step {n} loss={f} tflops={f}",
]


def _noise(r: random.Random, e: Env, n: int, trap: bool = True) -> list[str]:
    out = []
    for _ in range(n):
        t = r.choice(_NOISE)
        out.append(t.format(p=_param(r), n=r.randint(0, 99), w=r.choice(["combine", "coalesce", "matmul", "ws"]),
                            site=e.site, f=f"{r.random() * 3:.3f}", date=f"2025-0{r.randint(1, 9)}-1{r.randint(0, 9)}T"
                            f"{r.randint(10, 23)}:{r.randint(10, 59)}:{r.randint(10, 59)}Z"))
    if trap and r.random() < 0.2:  # a retried connection reset early in the job: not the failure
        out.insert(r.randint(0, max(0, len(out) // 3)), "WARNING: Retrying (Retry(total=4)) after connection broken by "
                   "'ConnectionResetError(104, 'Connection reset by peer')': /simple/torch/")
    return out


def generate(seed: int = 0, per_group: int = 9, noise: tuple[int, int] = (20, 400)) -> list[Sample]:
    """`per_group` samples of each of the true groups (len(TEMPLATES)), shuffled."""
    r = random.Random(seed)
    out: list[Sample] = []
    for group, make in TEMPLATES.items():
        for _ in range(per_group):
            e = _env(r)
            test, text = make(r, e)
            if group == "empty-log":
                out.append(Sample(group, test, ""))
                continue
            pre = _noise(r, e, r.randint(*noise))
            post = _noise(r, e, r.randint(0, 15), trap=False) if r.random() < 0.5 else []
            post += [f"{'=' * 10} 1 failed, {r.randint(1, 900)} passed in {r.random() * 900:.2f}s {'=' * 10}"]
            out.append(Sample(group, test, "\n".join(pre + [text] + post) + "\n"))
    r.shuffle(out)
    return out
