


all-gather.6
kAllGather
%

all-gather-start.1kAsyncStart
 

all-gather.1.1
kAllGather
$

custom-call.7kCublasLtMatmul


	fusion.33kCustomKernel
#

all-gather-done.1
kAsyncDone
%

all-gather-start.2kAsyncStart
 

all-gather.2.1
kAllGather
$

custom-call.8	kCublasLtMatmul


	fusion.34
kCustomKernel
#

all-gather-done.2
kAsyncDone
%

all-gather-start.3kAsyncStart
 

all-gather.3.1
kAllGather
$

custom-call.9kCublasLtMatmul


	fusion.35kCustomKernel
#

all-gather-done.3
kAsyncDone
%

custom-call.10kCublasLtMatmul
0

input_convert_reduce_fusionkCustomKernel
(

input_reduce_fusionkCustomKernel


fusion-startkAsyncStart
0

all-reduce.4.0-fusion.1kCollectiveKernel
$

custom-call.0kCublasLtMatmul


	fusion.32kCustomKernel
)

loop_select_fusion.2kCustomKernel
$

custom-call.6kCublasLtMatmul
$

custom-call.2kCublasLtMatmul


	fusion.31kCustomKernel
)

reduce-scatter-start.3kAsyncStart
(

reduce-scatter.3.1kReduceScatter
)

loop_select_fusion.1kCustomKernel
$

custom-call.5kCublasLtMatmul
$

custom-call.3 kCublasLtMatmul


	fusion.30!kCustomKernel
'

reduce-scatter-done.3"
kAsyncDone
)

reduce-scatter-start.2#kAsyncStart
(

reduce-scatter.2.1$kReduceScatter
$

custom-call.4%kCublasLtMatmul
'

loop_select_fusion&kCustomKernel
'

reduce-scatter-done.2'
kAsyncDone
)

reduce-scatter-start.1(kAsyncStart
(

reduce-scatter.1.1)kReduceScatter
$

custom-call.1*kCublasLtMatmul
'

reduce-scatter-done.1+
kAsyncDone
'

reduce-scatter-start,kAsyncStart
&

reduce-scatter.5-kReduceScatter


fusion-done.
kAsyncDone
)

loop_multiply_fusion/kCustomKernel
)

loop_subtract_fusion0kCustomKernel
+

loop_subtract_fusion.11kCustomKernel
+

loop_subtract_fusion.22kCustomKernel
%

reduce-scatter-done3
kAsyncDone
+

loop_subtract_fusion.34kCustomKernel