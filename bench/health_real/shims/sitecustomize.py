"""Run-time compatibility for the real-scripts health bench (on PYTHONPATH, not the scripts'
folder): gym 0.26's environment checker still names numpy.bool8, gone in numpy 2."""
try:
    import numpy

    if not hasattr(numpy, "bool8"):
        numpy.bool8 = numpy.bool_
except ImportError:
    pass
