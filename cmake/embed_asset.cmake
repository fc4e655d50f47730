# Writes the text file INPUT into OUTPUT as a C++ raw string literal named NAME (a .inc file
# included in one .cpp), so that an asset such as the HTML report's stylesheet is edited as a
# file of its own and still compiled into the binary: the report stays one self-contained file.
# The bytes are copied as they are; the .inc is rewritten only when they change.
#
#   cmake -DINPUT=assets/report.css -DOUTPUT=report_css.inc -DNAME=report_css -P embed_asset.cmake
foreach(var INPUT OUTPUT NAME)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_asset.cmake: -D${var}=... is required")
  endif()
endforeach()
file(READ "${INPUT}" content)
# The literal ends at the first )evalbox_asset" in it: an asset holding that cannot be embedded.
set(delimiter "evalbox_asset")
string(FIND "${content}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains ')${delimiter}\"' and cannot be embedded")
endif()
get_filename_component(source "${INPUT}" NAME)
set(text "// Generated at build time from ${source} by cmake/embed_asset.cmake: edit that file.\n")
string(APPEND text "inline constexpr std::string_view ${NAME} = R\"${delimiter}(${content})${delimiter}\";\n")
file(WRITE "${OUTPUT}.tmp" "${text}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
