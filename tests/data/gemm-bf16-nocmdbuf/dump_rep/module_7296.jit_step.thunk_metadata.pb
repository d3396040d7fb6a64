
$

custom-call.1kCublasLtMatmul
.

gemm_fusion_dot_general.4kCustomKernel
$

custom-call.0kCublasLtMatmul
.

gemm_fusion_dot_general.5kCustomKernel
$

custom-call.2kCublasLtMatmul
.

gemm_fusion_dot_general.6kCustomKernel
$

custom-call.3kCublasLtMatmul
.

gemm_fusion_dot_general.7kCustomKernel