import os

import torch.utils.cpp_extension as ext

ext.CUDA_HOME = os.environ["CUDA_HOME"]  # a CPU torch finds no toolkit; the fake nvcc under test is this one
