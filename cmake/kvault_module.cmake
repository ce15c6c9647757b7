# kvault_module(NAME DEPS...): a static library from every .cc in the current
# source directory. Include paths are rooted at src/ so headers read as
# "core/status.h", "kv/page_pool.h".
function(kvault_module name)
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  if(_srcs)
    add_library(${name} STATIC ${_srcs})
    set(_scope PUBLIC)
  else()  # header-only so far
    add_library(${name} INTERFACE)
    set(_scope INTERFACE)
  endif()
  target_include_directories(${name} ${_scope} ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} ${_scope} ${ARGN})
endfunction()

# kvault_tests(LIBS...): one GoogleTest executable per *_test.cc in the current
# source directory, each registered with ctest.
function(kvault_tests)
  file(GLOB _tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cc)
  foreach(_src ${_tests})
    get_filename_component(_name ${_src} NAME_WE)
    add_executable(${_name} ${_src})
    target_link_libraries(${_name} PRIVATE ${ARGN} GTest::gtest GTest::gtest_main
                          GTest::gmock)
    # Tests find ../shared (models, vocab vectors) relative to the source root.
    target_compile_definitions(${_name} PRIVATE
                               KVAULT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
    # A directory may set KVAULT_TEST_PREFIX (e.g. "jinja.") so that its
    # tests can be selected with `ctest -R`.
    gtest_discover_tests(${_name} DISCOVERY_TIMEOUT 60
                         TEST_PREFIX "${KVAULT_TEST_PREFIX}"
                         PROPERTIES LABELS unit)
  endforeach()
endfunction()
