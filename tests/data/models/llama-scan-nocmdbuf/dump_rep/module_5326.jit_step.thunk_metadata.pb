
(

loop_power_fusion.1kCustomKernel
.

loop_cosine_sine_fusion.1kCustomKernel


copy.132kCopy


copy.10kCopy
*

loop_broadcast_fusionkCustomKernel
'

loop_gather_fusionkCustomKernel


while.1kWhile
*

loop_compare_fusion.1kCustomKernel
!

fusion-start.2	kAsyncStart
6

loop_dynamic_slice_fusion.3kDynamicSliceFusion
!

fusion-start.1kAsyncStart
6

loop_dynamic_slice_fusion.2kDynamicSliceFusion


fusion-startkAsyncStart
>
'
#loop_dynamic_update_slice_fusion.10kDynamicSliceFusion
+

loop_convert_fusion.16kCustomKernel
+

loop_convert_fusion.17kCustomKernel
+

loop_convert_fusion.15kCustomKernel


fusion-done.2
kAsyncDone



fusion.208kCustomKernel
(

wrapped_concatenatekCustomKernel
%

custom-call.15kCublasLtMatmul
(

loop_slice_fusion.1kCustomKernel
/

input_concatenate_fusion.2kCustomKernel
/

input_concatenate_fusion.3kCustomKernel
)

dot_product_attention_fwd.0kCuDnn
+

loop_convert_fusion.14kCustomKernel
)

cublas-lt-matmul.2kCublasLtMatmul
+

loop_convert_fusion.13kCustomKernel


fusion-done.1 
kAsyncDone



fusion.207!kCustomKernel
+

loop_convert_fusion.12"kCustomKernel
%

custom-call.19#kCublasLtMatmul
%

custom-call.20$kCublasLtMatmul
+

loop_convert_fusion.11%kCustomKernel
+

loop_multiply_fusion.4&kCustomKernel
%

custom-call.21'kCublasLtMatmul


fusion-done(
kAsyncDone
&

loop_add_fusion.2)kCustomKernel
&

loop_add_fusion.3*kCustomKernel
*

input_reduce_fusion.8+kCustomKernel
(

loop_rsqrt_fusion.2,kCustomKernel
+

loop_convert_fusion.18-kCustomKernel
$

wrapped_convert.kCustomKernel
$

custom-call.6/kCublasLtMatmul
*

input_reduce_fusion.50kCustomKernel
+

input_reduce_fusion.111kCustomKernel
1
 
loop_broadcast_select_fusion2kCustomKernel
*

input_reduce_fusion.43kCustomKernel
*

input_reduce_fusion.94kCustomKernel
-

loop_add_subtract_fusion5kCustomKernel
+

loop_multiply_fusion.56kCustomKernel
+

input_scatter_fusion.17kCustomKernel
&

wrapped_convert.18kCustomKernel
$

custom-call.89kCublasLtMatmul
*

input_reduce_fusion.7:kCustomKernel
+

loop_multiply_fusion.6;kCustomKernel
0

input_convert_reduce_fusion<kCustomKernel


copy.23=kCopy
,

loop_broadcast_fusion.3>kCustomKernel
,

loop_broadcast_fusion.5?kCustomKernel
,

loop_broadcast_fusion.4@kCustomKernel
,

loop_broadcast_fusion.2AkCustomKernel


while.24BkWhile
(

loop_compare_fusionCkCustomKernel
*

loop_convert_fusion.8DkCustomKernel
*

loop_convert_fusion.9EkCustomKernel
*

input_reduce_fusion.1FkCustomKernel
+

loop_convert_fusion.10GkCustomKernel
(

loop_rsqrt_fusion.1HkCustomKernel
*

loop_convert_fusion.2IkCustomKernel
*

wrapped_concatenate.1JkCustomKernel
&

loop_power_fusionKkCustomKernel
%

custom-call.14LkCublasLtMatmul
,

loop_cosine_sine_fusionMkCustomKernel
&

loop_slice_fusionNkCustomKernel
-

input_concatenate_fusionOkCustomKernel
/

input_concatenate_fusion.1PkCustomKernel
*
 
dot_product_attention_fwd.15QkCuDnn
*

loop_convert_fusion.7RkCustomKernel
$

custom-call.7SkCublasLtMatmul
.

input_add_reduce_fusion.1TkCustomKernel
&

loop_rsqrt_fusionUkCustomKernel
*

loop_convert_fusion.5VkCustomKernel
*

loop_convert_fusion.1WkCustomKernel
*

loop_convert_fusion.3XkCustomKernel
%

custom-call.17YkCublasLtMatmul
*

loop_convert_fusion.4ZkCustomKernel
%

custom-call.18[kCublasLtMatmul
%

custom-call.16\kCublasLtMatmul
$

loop_add_fusion]kCustomKernel
+

loop_multiply_fusion.1^kCustomKernel
$

custom-call.0_kCublasLtMatmul
$

custom-call.1`kCublasLtMatmul
(

input_reduce_fusionakCustomKernel
+

loop_multiply_fusion.2bkCustomKernel
.

input_add_reduce_fusion.3ckCustomKernel
%

custom-call.12dkCublasLtMatmul
)

dot_product_attention_bwd.8ekCuDnn
(

loop_convert_fusionfkCustomKernel
*

loop_convert_fusion.6gkCustomKernel
%

custom-call.13hkCublasLtMatmul
$

custom-call.5ikCublasLtMatmul
$

custom-call.4jkCublasLtMatmul
.

input_add_reduce_fusion.2kkCustomKernel
)

loop_multiply_fusionlkCustomKernel
+

loop_multiply_fusion.3mkCustomKernel
$

custom-call.9nkCublasLtMatmul
,

input_add_reduce_fusionokCustomKernel
*

input_reduce_fusion.2pkCustomKernel
!

fusion-start.4qkAsyncStart
>
'
#loop_dynamic_update_slice_fusion.12skDynamicSliceFusion
*

input_reduce_fusion.3tkCustomKernel
!

fusion-start.3ukAsyncStart
>
'
#loop_dynamic_update_slice_fusion.11wkDynamicSliceFusion
*

wrapped_concatenate.2xkCustomKernel
%

custom-call.11ykCublasLtMatmul
7
&
"loop_dynamic_update_slice_fusion.5zkCustomKernel
'

gemm_fusion_dot.31{kCustomKernel
7
&
"loop_dynamic_update_slice_fusion.6|kCustomKernel
$

custom-call.2}kCublasLtMatmul
7
&
"loop_dynamic_update_slice_fusion.7~kCustomKernel
7
&
"loop_dynamic_update_slice_fusion.3kCustomKernel
%

custom-call.3ÄkCublasLtMatmul
8
'
"loop_dynamic_update_slice_fusion.8ÅkCustomKernel
8
'
"loop_dynamic_update_slice_fusion.4ÇkCustomKernel
8
'
"loop_dynamic_update_slice_fusion.2ÉkCustomKernel
 

fusion-done.4Ñ
kAsyncDone
 

fusion-done.3Ö
kAsyncDone
'

loop_add_fusion.1ÜkCustomKernel
-

loop_broadcast_fusion.1ákCustomKernel
*

input_scatter_fusionàkCustomKernel
1
 
loop_select_subtract_fusionâkCustomKernel
*

loop_subtract_fusionäkCustomKernel
'

loop_add_fusion.5ãkCustomKernel
'

loop_add_fusion.8åkCustomKernel
'

loop_add_fusion.7çkCustomKernel
'

loop_add_fusion.6ékCustomKernel
(

loop_add_fusion.10èkCustomKernel
'

loop_add_fusion.9êkCustomKernel
(

loop_add_fusion.12ëkCustomKernel
(

loop_add_fusion.11íkCustomKernel
(

loop_add_fusion.14ìkCustomKernel
(

loop_add_fusion.13îkCustomKernel
&

custom-call.10ïkCublasLtMatmul
'

loop_add_fusion.4ñkCustomKernel
,

input_reduce_fusion.10ókCustomKernel
(

loop_add_fusion.15òkCustomKernel
+

input_reduce_fusion.6ôkCustomKernel
,

loop_multiply_fusion.7ökCustomKernel