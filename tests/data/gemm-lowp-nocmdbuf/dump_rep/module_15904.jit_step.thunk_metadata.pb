
(

loop_convert_fusionkCustomKernel


	fusion.28kCustomKernel
$

cublas-gemm.1kCublasLtMatmul
/

gemm_fusion_dot_general.12kCustomKernel
*

loop_convert_fusion.1kCustomKernel


	fusion.30kCustomKernel
$

cublas-gemm.0kCublasLtMatmul
/

gemm_fusion_dot_general.13kCustomKernel
*

loop_convert_fusion.2	kCustomKernel


	fusion.24
kCustomKernel
$

wrapped_convertkCustomKernel
+

loop_multiply_fusion.1kCustomKernel
$

custom-call.1kCublasLtMatmul
/

gemm_fusion_dot_general.14kCustomKernel
*

loop_convert_fusion.3kCustomKernel


	fusion.26kCustomKernel
&

wrapped_convert.1kCustomKernel
)

loop_multiply_fusionkCustomKernel
$

custom-call.0kCublasLtMatmul
/

gemm_fusion_dot_general.15kCustomKernel
$

custom-call.2kCublasLtMatmul
!

wrapped_tanhkCustomKernel
$

custom-call.3kCublasLtMatmul
#

wrapped_tanh.1kCustomKernel
$

custom-call.4kCublasLtMatmul
#

wrapped_tanh.2kCustomKernel
$

custom-call.5kCublasLtMatmul
#

wrapped_tanh.3kCustomKernel