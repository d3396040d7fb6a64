
*

loop_broadcast_fusionkCustomKernel
)

input_scatter_fusionkCustomKernel
&

wrapped_transposekCustomKernel
(

wrapped_transpose.1kCustomKernel
(

wrapped_transpose.2kCustomKernel
(

wrapped_transpose.3kCustomKernel
 

cudnn-conv.4kConvolution
*

loop_maximum_fusion.2kCustomKernel
 

cudnn-conv.5	kConvolution
(

loop_maximum_fusion
kCustomKernel
 

cudnn-conv.6kConvolution
*

loop_maximum_fusion.1kCustomKernel
 

cudnn-conv.7kConvolution
(

input_reduce_fusionkCustomKernel
*

loop_convert_fusion.1kCustomKernel
.

gemm_fusion_dot_general.3kCustomKernel


	fusion.46kCustomKernel
$

gemm_fusion_dotkCustomKernel
*

input_reduce_fusion.2kCustomKernel
)

loop_subtract_fusionkCustomKernel


	fusion.35kCustomKernel
*

input_reduce_fusion.1kCustomKernel
'

loop_negate_fusionkCustomKernel
.

gemm_fusion_dot_general.5kCustomKernel
(

loop_convert_fusionkCustomKernel
'

loop_select_fusionkCustomKernel
*

cudnn-conv-bw-filter.7kConvolution
-

input_transpose_fusion.1kCustomKernel
)

cudnn-conv-bw-input.3kConvolution
)

loop_select_fusion.1kCustomKernel
*

cudnn-conv-bw-filter.6kConvolution
+

input_transpose_fusion kCustomKernel
)

cudnn-conv-bw-input.4!kConvolution
)

loop_select_fusion.2"kCustomKernel
*

cudnn-conv-bw-filter.5#kConvolution
)

cudnn-conv-bw-input.5$kConvolution
-

input_transpose_fusion.2%kCustomKernel
)

loop_select_fusion.3&kCustomKernel
*

cudnn-conv-bw-filter.4'kConvolution
-

input_transpose_fusion.3(kCustomKernel