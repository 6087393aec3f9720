# Chart of bench/cluster_overlap.sh's results: gnuplot -e "datafile='X.dat'; outfile='X.png'; nodes=N"
# cluster_overlap.gp. Every run (each rate, overlap off/on, fp32/bf16, every repetition): the measured
# step time split into its exposed all-reduce and the rest, and the model's prediction (docs/scaling.md).
set terminal pngcairo size 1400,560 font ",10"
set output outfile
if (!exists("nodes")) nodes = 2
set title sprintf("rnn\\_dist step time on %d node(s) x 2 ranks (config S, CPU): overlap and bf16 all-reduce, measured vs model", nodes)
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set grid ytics
set key top left
set ylabel "seconds per step"
set yrange [0:*]
set offsets 0, 0, 0.06, 0
set xtics rotate by -45 font ",8"
set rmargin 8
# columns: 1 rate, 2 overlap, 3 dtype, 5 step_s, 6 other_s, 7 allreduce_s, 8 predicted_step_s
plot datafile using 6:xtic(sprintf("%s %s %s", stringcolumn(1), stringcolumn(2) eq "on" ? "overlap" : "serial", stringcolumn(3))) title "measured: compute, update, data" lc rgb "#1f77b4", \
     '' using 7 title "measured: exposed all-reduce" lc rgb "#ff7f0e", \
     '' using ($0):8 with points pt 7 ps 1.5 lc rgb "#000000" title "model: step time"
