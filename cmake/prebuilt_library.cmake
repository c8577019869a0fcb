# qexact::qexact imported from the build tree QEXACT_LIBRARY_BUILD_DIR (its qexactConfig.cmake
# and qexactTargets.cmake), for the Python module only. The tree must be configured from this
# very source folder: a library built from another checkout would link, and give other bytes.
if(NOT QEXACT_BUILD_PYTHON)
  message(FATAL_ERROR "QEXACT_LIBRARY_BUILD_DIR serves the Python module only: set QEXACT_BUILD_PYTHON=ON")
endif()
get_filename_component(qexact_prebuilt_dir "${QEXACT_LIBRARY_BUILD_DIR}" ABSOLUTE)
if(NOT EXISTS "${qexact_prebuilt_dir}/CMakeCache.txt" OR NOT EXISTS "${qexact_prebuilt_dir}/qexactTargets.cmake")
  message(FATAL_ERROR "QEXACT_LIBRARY_BUILD_DIR=${qexact_prebuilt_dir} is not a configured qexact build tree "
                      "(no CMakeCache.txt or qexactTargets.cmake): run `cmake --preset release` first")
endif()
load_cache("${qexact_prebuilt_dir}" READ_WITH_PREFIX prebuilt_ qexact_SOURCE_DIR CMAKE_CXX_FLAGS)
file(REAL_PATH "${prebuilt_qexact_SOURCE_DIR}" prebuilt_source)
file(REAL_PATH "${PROJECT_SOURCE_DIR}" this_source)
if(NOT prebuilt_source STREQUAL this_source)
  message(FATAL_ERROR "QEXACT_LIBRARY_BUILD_DIR=${qexact_prebuilt_dir} was configured from ${prebuilt_source}, "
                      "not from this source (${this_source})")
endif()
if(prebuilt_CMAKE_CXX_FLAGS MATCHES "-fsanitize")
  message(FATAL_ERROR "QEXACT_LIBRARY_BUILD_DIR=${qexact_prebuilt_dir} is a sanitizer build: "
                      "a Python module cannot load its runtime")
endif()
find_package(qexact CONFIG REQUIRED PATHS "${qexact_prebuilt_dir}" NO_DEFAULT_PATH)
get_target_property(qexact_prebuilt_archive qexact::qexact IMPORTED_LOCATION_RELEASE)
if(NOT qexact_prebuilt_archive)
  get_target_property(qexact_prebuilt_archive qexact::qexact IMPORTED_LOCATION_RELWITHDEBINFO)
endif()
if(NOT qexact_prebuilt_archive OR NOT EXISTS "${qexact_prebuilt_archive}")
  message(FATAL_ERROR "QEXACT_LIBRARY_BUILD_DIR=${qexact_prebuilt_dir} has not built the library yet "
                      "(${qexact_prebuilt_archive}): run `cmake --build ${qexact_prebuilt_dir} --target qexact`")
endif()
message(STATUS "qexact: the Python module links ${qexact_prebuilt_archive}")
