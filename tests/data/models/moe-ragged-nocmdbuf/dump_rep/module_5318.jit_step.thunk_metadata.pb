
0

loop_select_subtract_fusionkCustomKernel
)

loop_subtract_fusionkCustomKernel
,

loop_broadcast_fusion.1kCustomKernel
$

wrapped_convertkCustomKernel
&

wrapped_convert.4kCustomKernel
,

loop_broadcast_fusion.2kCustomKernel
&

wrapped_convert.8kCustomKernel
*

loop_broadcast_fusionkCustomKernel
/

input_gather_reduce_fusion	kCustomKernel
(

loop_rsqrt_fusion.2
kCustomKernel
(

loop_convert_fusionkCustomKernel
/

gemm_fusion_dot_general.13kCustomKernel


	fusion.31kCustomKernel



fusion.443kCustomKernel
,

input_scatter_fusion.10kCustomKernel
0

loop_reduce_window_fusion.1kCustomKernel
/

input_concatenate_fusion.2kCustomKernel
*

input_reduce_fusion.6kCustomKernel
)

loop_divide_fusion.1kCustomKernel
"

wrapped_slicekCustomKernel


	fusion.32kCopy


	fusion.32kCustomKernel


	fusion.32kCustomKernel


	fusion.32kCustomKernel


	fusion.32kCustomKernel


	fusion.32kCustomKernel


	fusion.32kCustomKernel
$

loop_and_fusionkCustomKernel
&

wrapped_convert.2kCustomKernel
&

wrapped_convert.1kCustomKernel
&

wrapped_convert.3kCustomKernel
&

wrapped_convert.6 kCustomKernel
&

wrapped_convert.5!kCustomKernel
&

wrapped_convert.7"kCustomKernel
,

loop_broadcast_fusion.3#kCustomKernel
,

input_scatter_fusion.11$kCustomKernel
)

loop_select_fusion.4%kCustomKernel
&

wrapped_transpose&kCustomKernel
$

custom-call.4'kCublasLtMatmul
$

custom-call.3(kCublasLtMatmul
+

loop_multiply_fusion.2)kCustomKernel
'

loop_select_fusion*kCustomKernel
(

wrapped_transpose.1+kCustomKernel
%

custom-call.11,kCublasLtMatmul
9
(
$loop_broadcast_compare_select_fusion-kCustomKernel


copy.21.kCopy


copy.18/kCopy
+

input_scatter_fusion.90kCustomKernel
.

input_add_reduce_fusion.11kCustomKernel
(

loop_rsqrt_fusion.12kCustomKernel
*

loop_convert_fusion.13kCustomKernel
/

gemm_fusion_dot_general.144kCustomKernel


	fusion.335kCustomKernel



fusion.4446kCustomKernel
+

input_scatter_fusion.77kCustomKernel
.

loop_reduce_window_fusion8kCustomKernel
-

input_concatenate_fusion9kCustomKernel
/

input_concatenate_fusion.1:kCustomKernel
*

input_reduce_fusion.7;kCustomKernel
'

loop_divide_fusion<kCustomKernel
$

wrapped_slice.1=kCustomKernel


	fusion.34>kCopy


	fusion.34?kCustomKernel


	fusion.34@kCustomKernel


	fusion.34AkCustomKernel


	fusion.34BkCustomKernel


	fusion.34CkCustomKernel


	fusion.34DkCustomKernel
+

input_scatter_fusion.8EkCustomKernel
&

loop_and_fusion.1FkCustomKernel
)

loop_select_fusion.5GkCustomKernel
(

wrapped_transpose.2HkCustomKernel
$

custom-call.6IkCublasLtMatmul
$

custom-call.5JkCublasLtMatmul
+

loop_multiply_fusion.4KkCustomKernel
)

loop_select_fusion.1LkCustomKernel
(

wrapped_transpose.3MkCustomKernel
%

custom-call.12NkCublasLtMatmul
/

loop_compare_select_fusionOkCustomKernel
+

input_scatter_fusion.6PkCustomKernel
.

input_add_reduce_fusion.2QkCustomKernel
&

loop_rsqrt_fusionRkCustomKernel
*

loop_convert_fusion.2SkCustomKernel
$

custom-call.2TkCublasLtMatmul
*

input_reduce_fusion.1UkCustomKernel
)

loop_select_fusion.8VkCustomKernel
*

input_reduce_fusion.2WkCustomKernel
-

loop_add_subtract_fusionXkCustomKernel
*

input_reduce_fusion.8YkCustomKernel
+

loop_multiply_fusion.8ZkCustomKernel
)

loop_multiply_fusion[kCustomKernel
+

input_scatter_fusion.5\kCustomKernel
&

wrapped_convert.9]kCustomKernel
/

gemm_fusion_dot_general.17^kCustomKernel
&

gemm_fusion_dot.2_kCustomKernel
*

input_reduce_fusion.4`kCustomKernel
+

loop_multiply_fusion.5akCustomKernel
1
 
input_reduce_select_fusion.1bkCustomKernel
+

input_scatter_fusion.4ckCustomKernel
'

gemm_fusion_dot.34dkCustomKernel
&

loop_add_fusion.4ekCustomKernel
/

gemm_fusion_dot_general.21fkCustomKernel
&

loop_add_fusion.2gkCustomKernel
)

loop_select_fusion.6hkCustomKernel
%

custom-call.10ikCublasLtMatmul
(

wrapped_transpose.4jkCustomKernel
/

input_add_transpose_fusionkkCustomKernel
$

custom-call.7lkCublasLtMatmul
&

loop_add_fusion.1mkCustomKernel
+

loop_multiply_fusion.3nkCustomKernel


copy.75okCopy
)

loop_select_fusion.2pkCustomKernel
%

custom-call.19qkCublasLtMatmul
%

custom-call.20rkCublasLtMatmul
(

wrapped_transpose.5skCustomKernel
(

wrapped_transpose.6tkCustomKernel
1
 
input_add_transpose_fusion.3ukCustomKernel
%

custom-call.14vkCublasLtMatmul


copy.76wkCopy
1
 
input_add_transpose_fusion.2xkCustomKernel
%

custom-call.13ykCublasLtMatmul
+

input_scatter_fusion.3zkCustomKernel


copy.78{kCopy
*

input_reduce_fusion.3|kCustomKernel
+

loop_multiply_fusion.6}kCustomKernel
,

input_add_reduce_fusion~kCustomKernel
/

input_reduce_select_fusionkCustomKernel
,

input_scatter_fusion.2ÄkCustomKernel
(

gemm_fusion_dot.33ÅkCustomKernel
'

loop_add_fusion.5ÇkCustomKernel
,

input_reduce_fusion.11ÉkCustomKernel
,

input_reduce_fusion.10ÑkCustomKernel
'

loop_add_fusion.6ÖkCustomKernel
'

loop_add_fusion.7ÜkCustomKernel
0

gemm_fusion_dot_general.25ákCustomKernel
*

loop_select_fusion.7àkCustomKernel
%

custom-call.9âkCublasLtMatmul
)

wrapped_transpose.7äkCustomKernel
2
!
input_add_transpose_fusion.1ãkCustomKernel
%

custom-call.8åkCublasLtMatmul
%

loop_add_fusionçkCustomKernel
,

loop_multiply_fusion.1ékCustomKernel


copy.70èkCopy
*

loop_select_fusion.3êkCustomKernel
&

custom-call.17ëkCublasLtMatmul
&

custom-call.18íkCublasLtMatmul
)

wrapped_transpose.8ìkCustomKernel
)

wrapped_transpose.9îkCustomKernel
2
!
input_add_transpose_fusion.5ïkCustomKernel
&

custom-call.16ñkCublasLtMatmul


copy.71ókCopy
2
!
input_add_transpose_fusion.4òkCustomKernel
&

custom-call.15ôkCublasLtMatmul
,

input_scatter_fusion.1ökCustomKernel


copy.73õkCopy
+

input_reduce_fusion.5úkCustomKernel
,

loop_multiply_fusion.7ùkCustomKernel
*

input_scatter_fusionûkCustomKernel
)

input_reduce_fusionükCustomKernel
+

input_reduce_fusion.9†kCustomKernel
'

loop_add_fusion.8°kCustomKernel
'

loop_add_fusion.3¢kCustomKernel