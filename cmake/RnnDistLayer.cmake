# rnn_dist_layer(NAME SOURCES ... [PUBLIC ...] [PRIVATE ...]): the static library rnn_dist_NAME of one layer
# (src/NAME/, headers in include/rnn_dist/NAME/). PUBLIC lists the layers (and libraries) its headers
# expose, PRIVATE those only its sources use. A layer may use what it links and what those expose in turn;
# tests/layers.sh checks every include and every symbol against that.
function(rnn_dist_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;PUBLIC;PRIVATE" ${ARGN})
  set(target rnn_dist_${name})
  add_library(${target} STATIC ${L_SOURCES})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(${target} PRIVATE ${RNN_DIST_WARNINGS})
  target_link_libraries(${target} PUBLIC ${L_PUBLIC} PRIVATE ${L_PRIVATE})
  # For tests/layers.sh: the layer's archive and the layers it links, "public:NAME" or "private:NAME".
  set(deps)
  foreach(kind PUBLIC PRIVATE)
    string(TOLOWER ${kind} k)
    foreach(d ${L_${kind}})
      if(d MATCHES "^rnn_dist_(.*)$")
        list(APPEND deps ${k}:${CMAKE_MATCH_1})
      endif()
    endforeach()
  endforeach()
  list(JOIN deps " " deps)
  set_property(GLOBAL APPEND PROPERTY RNN_DIST_LAYER_LINES "${name} $<TARGET_FILE:${target}> ${deps}")
endfunction()

# Writes build/layers.txt, one line per layer: name, archive, the layers it links directly.
function(rnn_dist_write_layers)
  get_property(lines GLOBAL PROPERTY RNN_DIST_LAYER_LINES)
  list(JOIN lines "\n" content)
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/layers.txt CONTENT "${content}\n")
endfunction()
