// Stand-in for <cuda_fp16.h> when a corpus kernel is compiled for the CPU simulator.
#pragma once
#include "sim_cuda.h"
