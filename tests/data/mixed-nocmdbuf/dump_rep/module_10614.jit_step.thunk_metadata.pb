
&

wrapped_transposekCustomKernel
 

cudnn-conv.1kConvolution
$

custom-call.2kCublasLtMatmul
$

custom-call.3kCublasLtMatmul
$

custom-call.4kCublasLtMatmul
,

input_add_reduce_fusionkCustomKernel
(

input_reduce_fusionkCustomKernel