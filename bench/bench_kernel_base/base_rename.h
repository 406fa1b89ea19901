/* Force-included (-include) into every file of this folder: the kernel as it was before issue 12,
 * frozen here so that bench_kernel can time today's kernel against it in the same run. Every
 * external name of the copy gets a base_ prefix so it links beside the real library. */
#define tf_sweep_impl base_sweep_impl
#define tf_sweep base_sweep
#define tf_isa_ops_for base_isa_ops_for
#define tf_series_reserve base_series_reserve
#define tf_series_publish base_series_publish
#define tf_wma_scalar base_wma_scalar
#define tf_wma_sse2 base_wma_sse2
#define tf_wma_avx2 base_wma_avx2
#define tf_wma_avx512 base_wma_avx512
#define tf_raw_scalar base_raw_scalar
#define tf_raw_sse2 base_raw_sse2
#define tf_raw_avx2 base_raw_avx2
#define tf_raw_avx512 base_raw_avx512
#define tf_inner_scalar base_inner_scalar
#define tf_inner_sse2 base_inner_sse2
#define tf_inner_avx2 base_inner_avx2
#define tf_inner_avx512 base_inner_avx512
