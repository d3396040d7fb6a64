



copy.2kCopy
0

loop_select_subtract_fusionkCustomKernel
)

loop_subtract_fusionkCustomKernel
$

wrapped_convertkCustomKernel
&

loop_add_fusion.3kCustomKernel



fusion.240kCustomKernel
&

wrapped_convert.1kCustomKernel
$

custom-call.0kCublasLtMatmul
(

loop_slice_fusion.3	kCustomKernel
(

loop_slice_fusion.4
kCustomKernel
(

loop_slice_fusion.5kCustomKernel
*
 
dot_product_attention_fwd.10kCuDnn
&

wrapped_convert.2kCustomKernel
%

custom-call.12kCublasLtMatmul
&

loop_add_fusion.2kCustomKernel



fusion.241kCustomKernel
&

wrapped_convert.3kCustomKernel
$

custom-call.6kCublasLtMatmul
3
"
loop_convert_multiply_fusion.1kCustomKernel
&

wrapped_convert.4kCustomKernel
$

custom-call.4kCublasLtMatmul
&

loop_add_fusion.1kCustomKernel



fusion.242kCustomKernel
&

wrapped_convert.5kCustomKernel
$

custom-call.2kCublasLtMatmul
&

loop_slice_fusionkCustomKernel
(

loop_slice_fusion.1kCustomKernel
(

loop_slice_fusion.2kCustomKernel
*
 
dot_product_attention_fwd.15kCuDnn
&

wrapped_convert.6kCustomKernel
%

custom-call.13kCublasLtMatmul
$

loop_add_fusion kCustomKernel



fusion.243!kCustomKernel
&

wrapped_convert.7"kCustomKernel
$

custom-call.7#kCublasLtMatmul
1
 
loop_convert_multiply_fusion$kCustomKernel
&

wrapped_convert.8%kCustomKernel
$

custom-call.5&kCublasLtMatmul



fusion.244'kCustomKernel
&

wrapped_convert.9(kCustomKernel
$

custom-call.3)kCublasLtMatmul
*

input_reduce_fusion.6*kCustomKernel
+

input_reduce_fusion.14+kCustomKernel
'

loop_select_fusion,kCustomKernel
*

input_reduce_fusion.5-kCustomKernel
+

input_reduce_fusion.10.kCustomKernel
-

loop_add_subtract_fusion/kCustomKernel
)

loop_multiply_fusion0kCustomKernel
+

input_scatter_fusion.11kCustomKernel
'

wrapped_convert.102kCustomKernel
$

custom-call.13kCublasLtMatmul



fusion.2394kCustomKernel
%

custom-call.105kCublasLtMatmul
&

loop_add_fusion.46kCustomKernel
%

custom-call.197kCublasLtMatmul



fusion.3108kCustomKernel
$

custom-call.89kCublasLtMatmul
*
 
dot_product_attention_bwd.16:kCuDnn
&

loop_add_fusion.9;kCustomKernel
%

custom-call.14<kCublasLtMatmul



fusion.311=kCustomKernel
%

custom-call.11>kCublasLtMatmul
&

loop_add_fusion.5?kCustomKernel
%

custom-call.20@kCublasLtMatmul



fusion.312AkCustomKernel
$

custom-call.9BkCublasLtMatmul
*
 
dot_product_attention_bwd.24CkCuDnn
&

loop_add_fusion.8DkCustomKernel
%

custom-call.15EkCublasLtMatmul



fusion.204FkCustomKernel
*

input_reduce_fusion.4GkCustomKernel
*

input_reduce_fusion.9HkCustomKernel
'

loop_add_fusion.23IkCustomKernel



fusion.203JkCustomKernel
*

input_reduce_fusion.3KkCustomKernel
+

input_reduce_fusion.13LkCustomKernel
'

loop_add_fusion.22MkCustomKernel
'

gemm_fusion_dot.27NkCustomKernel
'

loop_add_fusion.11OkCustomKernel
%

custom-call.16PkCublasLtMatmul
'

loop_add_fusion.13QkCustomKernel
'

gemm_fusion_dot.29RkCustomKernel
'

loop_add_fusion.18SkCustomKernel
'

gemm_fusion_dot.30TkCustomKernel
'

loop_add_fusion.15UkCustomKernel



fusion.202VkCustomKernel
*

input_reduce_fusion.2WkCustomKernel
+

input_reduce_fusion.11XkCustomKernel
'

loop_add_fusion.21YkCustomKernel



fusion.201ZkCustomKernel
*

input_reduce_fusion.1[kCustomKernel
+

input_reduce_fusion.12\kCustomKernel
'

loop_add_fusion.20]kCustomKernel
'

gemm_fusion_dot.31^kCustomKernel
'

loop_add_fusion.10_kCustomKernel
%

custom-call.17`kCublasLtMatmul
'

loop_add_fusion.12akCustomKernel
'

gemm_fusion_dot.33bkCustomKernel
'

loop_add_fusion.17ckCustomKernel
'

gemm_fusion_dot.34dkCustomKernel
'

loop_add_fusion.14ekCustomKernel



fusion.200fkCustomKernel
(

input_reduce_fusiongkCustomKernel
*

input_reduce_fusion.8hkCustomKernel
'

loop_add_fusion.19ikCustomKernel
%

custom-call.18jkCublasLtMatmul
&

loop_add_fusion.7kkCustomKernel



fusion.313lkCustomKernel
'

loop_add_fusion.16mkCustomKernel
*

loop_broadcast_fusionnkCustomKernel
)

input_scatter_fusionokCustomKernel
&

loop_add_fusion.6pkCustomKernel
*

input_reduce_fusion.7qkCustomKernel
+

loop_multiply_fusion.1rkCustomKernel