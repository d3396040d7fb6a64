
0

loop_select_subtract_fusionkCustomKernel
)

loop_subtract_fusionkCustomKernel
*

input_reduce_fusion.5kCustomKernel
*

input_reduce_fusion.6kCustomKernel
,

loop_multiply_fusion.11kCustomKernel
*

loop_convert_fusion.5kCustomKernel
&

wrapped_transposekCustomKernel
*

input_reduce_fusion.4kCustomKernel
*

input_reduce_fusion.7	kCustomKernel
,

loop_multiply_fusion.10
kCustomKernel
-

input_transpose_fusion.1kCustomKernel



fusion.205kCustomKernel
$

cublas-gemm.9kCublasLtMatmul
0

input_convert_reduce_fusionkCustomKernel
*

input_reduce_fusion.8kCustomKernel
+

loop_multiply_fusion.9kCustomKernel
*

loop_convert_fusion.1kCustomKernel
*

input_reduce_fusion.3kCustomKernel
*

input_reduce_fusion.9kCustomKernel
+

loop_multiply_fusion.8kCustomKernel
-

input_transpose_fusion.3kCustomKernel



fusion.196kCustomKernel
$

cublas-gemm.3kCublasLtMatmul
*

input_reduce_fusion.2kCustomKernel
+

input_reduce_fusion.10kCustomKernel
+

loop_multiply_fusion.7kCustomKernel
*

loop_convert_fusion.4kCustomKernel
*

input_reduce_fusion.1kCustomKernel
+

input_reduce_fusion.11kCustomKernel
+

loop_multiply_fusion.6kCustomKernel
+

input_transpose_fusionkCustomKernel



fusion.206 kCustomKernel
%

cublas-gemm.10!kCublasLtMatmul
2
!
input_convert_reduce_fusion.1"kCustomKernel
+

input_reduce_fusion.12#kCustomKernel
+

loop_multiply_fusion.5$kCustomKernel
(

loop_convert_fusion%kCustomKernel
(

input_reduce_fusion&kCustomKernel
+

input_reduce_fusion.13'kCustomKernel
+

loop_multiply_fusion.4(kCustomKernel
-

input_transpose_fusion.2)kCustomKernel



fusion.195*kCustomKernel
$

cublas-gemm.2+kCublasLtMatmul
.

input_add_reduce_fusion.1,kCustomKernel
+

input_reduce_fusion.14-kCustomKernel
+

loop_multiply_fusion.3.kCustomKernel
*

loop_convert_fusion.6/kCustomKernel



fusion.1970kCustomKernel



fusion.1981kCustomKernel
$

cublas-gemm.42kCublasLtMatmul
.

input_add_reduce_fusion.23kCustomKernel
+

input_reduce_fusion.154kCustomKernel
+

loop_multiply_fusion.25kCustomKernel
*

loop_convert_fusion.26kCustomKernel



fusion.2037kCustomKernel



fusion.2048kCustomKernel
$

cublas-gemm.89kCublasLtMatmul
,

input_add_reduce_fusion:kCustomKernel
+

input_reduce_fusion.16;kCustomKernel
+

loop_multiply_fusion.1<kCustomKernel
*

loop_convert_fusion.7=kCustomKernel



fusion.199>kCustomKernel



fusion.200?kCustomKernel
$

cublas-gemm.5@kCublasLtMatmul
.

input_add_reduce_fusion.3AkCustomKernel
+

input_reduce_fusion.17BkCustomKernel
)

loop_multiply_fusionCkCustomKernel
*

loop_convert_fusion.3DkCustomKernel
(

wrapped_transpose.1EkCustomKernel



fusion.193FkCustomKernel
$

cublas-gemm.1GkCublasLtMatmul
&

loop_add_fusion.1HkCustomKernel
(

wrapped_transpose.2IkCustomKernel
(

wrapped_transpose.3JkCustomKernel



fusion.201KkCustomKernel
$

cublas-gemm.6LkCublasLtMatmul
&

loop_add_fusion.3MkCustomKernel
(

wrapped_transpose.4NkCustomKernel
(

wrapped_transpose.5OkCustomKernel



fusion.194PkCustomKernel
$

cublas-gemm.0QkCublasLtMatmul
$

loop_add_fusionRkCustomKernel
(

wrapped_transpose.6SkCustomKernel
(

wrapped_transpose.7TkCustomKernel



fusion.202UkCustomKernel
$

cublas-gemm.7VkCublasLtMatmul
&

loop_add_fusion.2WkCustomKernel
+

input_reduce_fusion.18XkCustomKernel
,

loop_multiply_fusion.12YkCustomKernel