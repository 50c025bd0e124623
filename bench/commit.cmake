# Writes OUT with the source tree's commit (git describe), rewriting it only
# when the commit changed, so a build after a new commit relinks the bench
# and an unchanged tree rebuilds nothing. A tree without git says "unknown".
execute_process(COMMAND git -C "${SRC}" describe --always --dirty --abbrev=12
  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
file(WRITE "${OUT}.tmp" "#define BENCH_TERN_COMMIT \"${commit}\"\n")
configure_file("${OUT}.tmp" "${OUT}" COPYONLY)
