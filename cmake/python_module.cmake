# The Python extension module qexact._core (python/src/), linked to qexact::qexact: the library
# of this project, or an imported one from QEXACT_LIBRARY_BUILD_DIR (cmake/prebuilt_library.cmake).
# The library is static and position-independent; only this COMPONENT python install goes into
# the wheel.
find_package(Python 3.9 COMPONENTS Interpreter Development.Module REQUIRED)
execute_process(COMMAND "${Python_EXECUTABLE}" -m nanobind --cmake_dir
                OUTPUT_STRIP_TRAILING_WHITESPACE OUTPUT_VARIABLE nanobind_ROOT COMMAND_ERROR_IS_FATAL ANY)
find_package(nanobind CONFIG REQUIRED)
file(GLOB QEXACT_PYTHON_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/src/*.cpp)
nanobind_add_module(qexact_python NB_STATIC ${QEXACT_PYTHON_SOURCES})
set_target_properties(qexact_python PROPERTIES OUTPUT_NAME _core)
target_compile_options(qexact_python PRIVATE ${QEXACT_WARN_FLAGS} ${QEXACT_NUMERIC_FLAGS})
# The module binds the lab's compare (src/conformance/), whose headers are the library's own.
target_include_directories(qexact_python PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(qexact_python PRIVATE qexact::qexact)
install(TARGETS qexact_python LIBRARY DESTINATION qexact COMPONENT python)
