# khorovod.tensorflow's op library (_khorovod_tf_ops.so): TensorFlow custom
# ops over libkhorovod, compiled with the installed TensorFlow's own flags
# (tf.sysconfig.get_compile_flags / get_link_flags), as TensorFlow asks of
# custom ops. Included from python/CMakeLists.txt.
#
# KHOROVOD_WITH_TENSORFLOW: AUTO (default) builds it when TensorFlow imports
# in KHOROVOD_TENSORFLOW_PYTHON (default: the interpreter the package is
# built for) and says why not otherwise; ON requires it; OFF skips it.
# The interpreter is asked with -E (environment ignored), so under pip's
# build isolation it still sees the environment's own site-packages, where
# the user installed TensorFlow.
set(KHOROVOD_WITH_TENSORFLOW AUTO CACHE STRING "Build khorovod.tensorflow's ops: AUTO, ON or OFF")
set(KHOROVOD_TENSORFLOW_PYTHON "${Python3_EXECUTABLE}" CACHE FILEPATH
    "Interpreter whose TensorFlow the ops are built against")
set(KHOROVOD_TENSORFLOW_BUILT OFF)

if(NOT KHOROVOD_WITH_TENSORFLOW STREQUAL "OFF")
  execute_process(
    COMMAND ${KHOROVOD_TENSORFLOW_PYTHON} -E -c
      "import os; os.environ['TF_CPP_MIN_LOG_LEVEL']='3'; import tensorflow as tf; s=tf.sysconfig; print('KHTF_VERSION=' + tf.__version__); print('KHTF_CFLAGS=' + ';'.join(s.get_compile_flags())); print('KHTF_LDFLAGS=' + ';'.join(s.get_link_flags()))"
    RESULT_VARIABLE tf_rc OUTPUT_VARIABLE tf_out ERROR_VARIABLE tf_err
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(tf_rc EQUAL 0)
    # Only our three marked lines count (TensorFlow may print its own).
    string(REGEX MATCH "KHTF_VERSION=([^\n]*)" _ "${tf_out}")
    set(KHOROVOD_TENSORFLOW_VERSION "${CMAKE_MATCH_1}")
    string(REGEX MATCH "KHTF_CFLAGS=([^\n]*)" _ "${tf_out}")
    set(tf_cflags "${CMAKE_MATCH_1}")
    string(REGEX MATCH "KHTF_LDFLAGS=([^\n]*)" _ "${tf_out}")
    set(tf_ldflags "${CMAKE_MATCH_1}")
    message(STATUS "khorovod.tensorflow: building against TensorFlow ${KHOROVOD_TENSORFLOW_VERSION}")
    set(KHOROVOD_TENSORFLOW_BUILT ON)
  elseif(KHOROVOD_WITH_TENSORFLOW STREQUAL "ON")
    message(FATAL_ERROR "KHOROVOD_WITH_TENSORFLOW=ON but TensorFlow does not import in "
                        "${KHOROVOD_TENSORFLOW_PYTHON}: ${tf_err}")
  else()
    message(STATUS "khorovod.tensorflow: not built (TensorFlow does not import in ${KHOROVOD_TENSORFLOW_PYTHON})")
  endif()
endif()

if(KHOROVOD_TENSORFLOW_BUILT)
  add_library(khorovod_tf_ops MODULE src/tensorflow/op_defs.cc src/tensorflow/kernel_support.cc
    src/tensorflow/collective_kernels.cc src/tensorflow/control_kernels.cc src/tensorflow/runtime_slot.cc)
  # TensorFlow's flags name C++17; the runtime's headers need the project's
  # C++20, which TensorFlow's headers accept. Its ABI and Eigen settings are kept.
  # TensorFlow's headers are system headers here: their warnings are not
  # ours (the ci stage builds with warnings as errors).
  list(FILTER tf_cflags EXCLUDE REGEX "^--?std=")
  foreach(flag IN LISTS tf_cflags)
    if(flag MATCHES "^-I(.+)$")
      target_include_directories(khorovod_tf_ops SYSTEM PRIVATE "${CMAKE_MATCH_1}")
    else()
      target_compile_options(khorovod_tf_ops PRIVATE "${flag}")
    endif()
  endforeach()
  target_compile_options(khorovod_tf_ops PRIVATE -Wno-deprecated-declarations)
  target_link_libraries(khorovod_tf_ops PRIVATE khorovod ${tf_ldflags})
  target_include_directories(khorovod_tf_ops PRIVATE ${PROJECT_SOURCE_DIR}/runtime/util)  # util/mutex.h
  set_target_properties(khorovod_tf_ops PROPERTIES
    PREFIX "" OUTPUT_NAME _khorovod_tf_ops
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/python/khorovod/tensorflow)
  add_dependencies(khorovod_python khorovod_tf_ops)
  if(SKBUILD)
    # libkhorovod.so is one directory up, next to _khorovod.
    set_target_properties(khorovod_tf_ops PROPERTIES INSTALL_RPATH "$ORIGIN/..")
    install(TARGETS khorovod_tf_ops LIBRARY DESTINATION khorovod/tensorflow COMPONENT python)
  endif()
endif()
