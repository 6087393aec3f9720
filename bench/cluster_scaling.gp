# Chart of bench/cluster_scaling.sh's results: gnuplot -e "datafile='X.dat'; outfile='X.png'"
# cluster_scaling.gp. Per link rate and all-reduce algorithm: the measured step time, split into its
# all-reduce and the rest, next to the model's prediction (docs/scaling.md).
set terminal pngcairo size 1000,520 font ",11"
set output outfile
set title "rnn\\_dist step time on 2 nodes x 2 ranks (config S, CPU): measured vs model"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.6
set grid ytics
set key top right
set ylabel "seconds per step"
set yrange [0:*]
set xtics rotate by -20
# columns: 1 rate, 2 algo, 4 step_s, 6 allreduce_s, 9 predicted_step_s, 11 accumulate
plot datafile using ($4 - $6):xtic(sprintf("%s %s%s", stringcolumn(1), stringcolumn(2), $11 > 1 ? sprintf(" K=%d", $11) : "")) title "measured: compute, update, data" lc rgb "#1f77b4", \
     '' using 6 title "measured: all-reduce" lc rgb "#ff7f0e", \
     '' using ($0):9 with points pt 7 ps 2 lc rgb "#000000" title "model: step time"
